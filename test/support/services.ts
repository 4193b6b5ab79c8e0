/**
 * Throwaway PostgreSQL and Redis servers for the store tests: on 127.0.0.1,
 * on free ports, with their data under a temp folder, stopped afterwards.
 *
 * Outside CI a missing binary skips the suites that need it, loudly; under
 * `CI=true` it is a failure, never a skip.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A server the tests can stop and start again on the same port and data. */
export interface TestServer {
  readonly url: string
  readonly port: number
  readonly stop: () => Promise<void>
  /** Stops it as a crash would: PostgreSQL's immediate shutdown (SIGQUIT), Redis killed (SIGKILL). */
  readonly crash: () => Promise<void>
  readonly start: () => Promise<void>
  readonly dispose: () => Promise<void>
  /** The server's process id while it runs (PostgreSQL's postmaster), to read its CPU time. */
  readonly pid: () => number | undefined
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

const postgresBin = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const version = readdirSync(root).sort((a, b) => Number(b) - Number(a)).find((v) => existsSync(join(root, v, "bin", "postgres")))
  return version === undefined ? undefined : join(root, version, "bin")
}

const redisBin = (): string | undefined =>
  ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find((path) => existsSync(path))

/** Why a service cannot run here, or undefined when it can. Under CI a missing service throws. */
export const missing = (service: "postgres" | "redis"): string | undefined => {
  const found = service === "postgres" ? postgresBin() : redisBin()
  if (found !== undefined) return undefined
  const reason = `${service} binaries not found (install the Debian package ${service === "postgres" ? "postgresql" : "redis-server"})`
  if (process.env.CI === "true") throw new Error(`CI needs ${service}: ${reason}`)
  console.warn(`\n*** SKIPPING the ${service} suites: ${reason} ***\n`)
  return reason
}

const waitFor = async (what: string, ready: () => boolean, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`${what} did not start within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const stopProcess = async (child: ChildProcess | undefined, signal: NodeJS.Signals) => {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once("exit", resolve))
  child.kill(signal)
  await exited
}

/** The postgres user, to run the server as when the tests run as root (PostgreSQL refuses root). */
const postgresUser = (): { readonly uid: number; readonly gid: number } | {} =>
  process.getuid?.() === 0
    ? { uid: Number(execFileSync("id", ["-u", "postgres"]).toString().trim()), gid: Number(execFileSync("id", ["-g", "postgres"]).toString().trim()) }
    : {}

export const startPostgres = async (): Promise<TestServer> => {
  const bin = postgresBin()!
  const dir = mkdtempSync(join(tmpdir(), "ai-effect-pg-"))
  const user = postgresUser()
  if ("uid" in user) chownSync(dir, user.uid, user.gid)
  const data = join(dir, "data")
  execFileSync(join(bin, "initdb"), ["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], { stdio: "ignore", ...user })
  const port = await freePort()
  let child: ChildProcess | undefined
  const start = async () => {
    child = spawn(join(bin, "postgres"), [
      "-D", data, "-p", String(port), "-k", dir, "-h", "127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"
    ], { stdio: "ignore", ...user })
    await waitFor("PostgreSQL", () => {
      try {
        execFileSync(join(bin, "pg_isready"), ["-h", "127.0.0.1", "-p", String(port)], { stdio: "ignore" })
        return true
      } catch {
        return false
      }
    })
  }
  await start()
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop: () => stopProcess(child, "SIGINT"),
    crash: () => stopProcess(child, "SIGQUIT"),
    pid: () => child?.pid,
    dispose: async () => {
      await stopProcess(child, "SIGINT")
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** Runs `use` against a PostgreSQL started for it, and stops the server afterwards, whatever `use` does. */
export const withPostgres = async <A>(use: (server: TestServer) => Promise<A>): Promise<A> => {
  const server = await startPostgres()
  try {
    return await use(server)
  } finally {
    await server.dispose()
  }
}

/**
 * A throwaway Redis. It persists as the store requires (an append-only file,
 * fsynced on every write); `"none"` persists nothing, and `"hidden"` persists
 * but refuses `CONFIG`, as managed services do.
 */
export const startRedis = async (options: { readonly persistence?: "aof" | "none" | "hidden" } = {}): Promise<TestServer> => {
  const aof = ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
  const persistence = options.persistence === "none"
    ? ["--save", "", "--appendonly", "no"]
    : options.persistence === "hidden"
    ? [...aof, "--rename-command", "CONFIG", ""]
    : aof
  const dir = mkdtempSync(join(tmpdir(), "ai-effect-redis-"))
  const port = await freePort()
  let child: ChildProcess | undefined
  const start = async () => {
    let output = ""
    child = spawn(redisBin()!, ["--port", String(port), "--bind", "127.0.0.1", ...persistence, "--dir", dir], {
      stdio: ["ignore", "pipe", "ignore"]
    })
    child.stdout!.on("data", (part: Buffer) => (output += part.toString()))
    await waitFor("Redis", () => output.includes("Ready to accept connections"))
  }
  await start()
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    stop: () => stopProcess(child, "SIGTERM"),
    crash: () => stopProcess(child, "SIGKILL"),
    pid: () => child?.pid,
    dispose: async () => {
      await stopProcess(child, "SIGTERM")
      rmSync(dir, { recursive: true, force: true })
    }
  }
}
