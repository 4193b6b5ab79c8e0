/**
 * The fault-injection suite: worker processes of the installed package on a
 * shared store, faults injected from the remote they apply effects to, and
 * every application counted there.
 *
 * A scenario runs in two phases. In the fault phase its workers call the
 * tool for every key while the scenario kills, stops, pauses or skews them,
 * or crashes the store's server. In the resolution phase one clean worker
 * calls every key once more, as a retry would: a key then reads as applied
 * (recorded or reconciled), in doubt (`EffectInDoubt`), or failed closed
 * with a typed error. The remote counts applications per key throughout;
 * a key applied twice is a duplicate.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { startPostgres, startRedis, type TestServer } from "../../support/services.ts"
import type { CallLine, FaultWorkerConfig } from "./worker.ts"

export type Backend = "sqlite" | "postgres" | "redis"

/** What a scenario saw, per backend: the row of the report. */
export interface ScenarioReport {
  readonly scenario: string
  readonly backend: Backend
  readonly keys: number
  /** Applications the remote accepted. */
  readonly applications: number
  /** Keys the remote accepted more than once. */
  readonly duplicates: number
  /** Keys whose resolution read `EffectInDoubt`. */
  readonly inDoubt: number
  /** Typed errors, by tag, over both phases. */
  readonly typedErrors: Record<string, number>
  /** Errors without a tag, and workers that ended with neither a signal nor exit code 0. */
  readonly untypedErrors: ReadonlyArray<string>
  /** Late effects the fence-checking remote refused. */
  readonly refused: number
  /** The largest difference between a worker's clock and the suite's, in ms: the skew that was injected. */
  readonly clockSkewSeen: number
  /** Keys whose resolution did not answer at all. */
  readonly unresolved: number
  /** Keys the remote never saw applied and whose resolution did not say in doubt: effects lost. */
  readonly lost: number
}

// ---------------------------------------------------------------------------
// The remote
// ---------------------------------------------------------------------------

interface Hooks {
  /** A worker has loaded and waits for this answer before it calls the tool. */
  readonly onReady?: (pid: number) => Promise<void> | void
  /** An effect is on its way: the worker waits for this answer. */
  readonly onIntent?: (key: string, pid: number) => Promise<void> | void
  /** An effect is arriving, not yet applied: it lands once this resolves. */
  readonly onArriving?: (key: string, pid: number) => Promise<void> | void
  /** An effect was applied (or refused): the worker waits for this answer. */
  readonly onApply?: (key: string, pid: number, accepted: boolean) => Promise<void> | void
}

interface Remote {
  readonly url: string
  readonly accepted: Map<string, number>
  readonly refused: () => number
  readonly clockSkewSeen: () => number
  hooks: Hooks
  readonly close: () => void
}

const startRemote = async (): Promise<Remote> => {
  const accepted = new Map<string, number>()
  const highestFence = new Map<string, number>()
  let refused = 0
  let clockSkewSeen = 0
  const remote: Remote = {
    url: "",
    accepted,
    refused: () => refused,
    clockSkewSeen: () => clockSkewSeen,
    hooks: {},
    close: () => {
      server.closeAllConnections()
      server.close()
    }
  }
  const answer = (res: ServerResponse, status: number, key: string) => {
    res.writeHead(status, { "content-type": "application/json" })
    res.end(JSON.stringify({ applied: accepted.get(key) ?? 0 }))
  }
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url!, "http://remote")
    const pid = Number(url.searchParams.get("pid"))
    const [, action, key = "", fenceText] = url.pathname.split("/")
    if (action === "ready") {
      clockSkewSeen = Math.max(clockSkewSeen, Math.abs(Number(url.searchParams.get("now")) - Date.now()))
      await remote.hooks.onReady?.(pid)
      return answer(res, 200, key)
    }
    if (action === "intent") {
      await remote.hooks.onIntent?.(key, pid)
      return answer(res, 200, key)
    }
    if (action === "apply") {
      // An effect takes a while to land: only then does the remote count it, or report it to a check.
      const landsIn = Number(url.searchParams.get("landsIn") ?? 0)
      if (landsIn > 0) await new Promise((resolve) => setTimeout(resolve, landsIn))
      await remote.hooks.onArriving?.(key, pid)
      // A fence-checking remote keeps the highest fence per key and refuses a lower one.
      const fence = fenceText === undefined ? undefined : Number(fenceText)
      const stale = fence !== undefined && fence < (highestFence.get(key) ?? 0)
      if (stale) refused++
      else {
        accepted.set(key, (accepted.get(key) ?? 0) + 1)
        if (fence !== undefined) highestFence.set(key, fence)
      }
      await remote.hooks.onApply?.(key, pid, !stale)
      return answer(res, stale ? 409 : 200, key)
    }
    return answer(res, 200, key)
  }
  const server = createServer((req, res) => {
    handle(req, res).catch((error) => {
      res.writeHead(500)
      res.end(String(error))
    })
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  return Object.assign(remote, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
}

// ---------------------------------------------------------------------------
// Workers
// ---------------------------------------------------------------------------

interface Worker {
  readonly child: ChildProcess
  readonly exited: Promise<WorkerEnd>
}

interface WorkerEnd {
  readonly pid: number
  readonly lines: ReadonlyArray<CallLine>
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stderr: string
}

const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/** Where the workers run: the consumer project, so that they import the installed package. */
export interface Setting {
  readonly consumerDir: string
  readonly node: string
}

const spawnWorker = (setting: Setting, config: FaultWorkerConfig, options: { readonly skew?: string } = {}): Worker => {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: "", AI_EFFECT_FAULT_WORKER: JSON.stringify(config) }
  // Debian's libfaketime shifts this worker's clock, and only this one's.
  if (options.skew !== undefined) {
    if (!existsSync(libfaketime)) throw new Error(`${libfaketime} is missing: install the Debian package faketime`)
    Object.assign(env, { LD_PRELOAD: libfaketime, FAKETIME: options.skew, FAKETIME_DONT_FAKE_MONOTONIC: "1" })
  }
  const child = spawn(setting.node, [join(setting.consumerDir, "fault-worker.ts")], {
    cwd: setting.consumerDir,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (part: Buffer) => (stdout += part.toString()))
  child.stderr!.on("data", (part: Buffer) => (stderr += part.toString()))
  const exited = once(child, "exit").then(([code, signal]) => ({
    pid: child.pid!,
    lines: stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as CallLine),
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    stderr
  }))
  return { child, exited }
}


// ---------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------

interface Store {
  readonly target: string
  readonly server?: TestServer
  /** The SQLite file's integrity, checked after its writers were killed. */
  readonly integrity?: () => string
  readonly dispose: () => Promise<void>
}

const startStore = async (backend: Backend, options: { readonly redisPersistence?: "aof" | "none" } = {}): Promise<Store> => {
  if (backend === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "ai-effect-faults-"))
    const file = join(dir, "effects.db")
    return {
      target: file,
      integrity: () => {
        const db = new DatabaseSync(file)
        try {
          return String((db.prepare("PRAGMA integrity_check").get() as { readonly integrity_check: string }).integrity_check)
        } finally {
          db.close()
        }
      },
      dispose: async () => rmSync(dir, { recursive: true, force: true })
    }
  }
  const server = backend === "postgres" ? await startPostgres() : await startRedis({ persistence: options.redisPersistence ?? "aof" })
  return { target: server.url, server, dispose: () => server.dispose() }
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

/** How large a run is: a quick one in CI, a full one for docs/reliability.md. */
export interface Size {
  readonly keys: number
  readonly workers: number
  readonly rounds: number
}

export const quick: Size = { keys: 12, workers: 4, rounds: 2 }
export const full: Size = { keys: 60, workers: 4, rounds: 8 }

interface Scenario {
  readonly name: string
  readonly backends: ReadonlyArray<Backend>
  /** Whether duplicates are a documented limit here, and which. */
  readonly limit?: string
  /** What the remote should count: every key applied once, or none (the store refused to start). */
  readonly applies?: "once" | "never"
  /** What proves that the fault hit the window it aims at. */
  readonly hit?: { readonly what: string; readonly seen: (report: ScenarioReport) => boolean }
  readonly run: (context: ScenarioContext) => Promise<void>
  readonly tool: Omit<FaultWorkerConfig, "backend" | "target" | "remote" | "keys">
  readonly redisPersistence?: "aof" | "none"
}

interface ScenarioContext {
  readonly size: Size
  readonly keys: ReadonlyArray<string>
  readonly remote: Remote
  readonly store: Store
  /** Starts a worker of the scenario's tool on some keys. */
  readonly worker: (keys: ReadonlyArray<string>, options?: { readonly skew?: string }) => Worker
  /** Records how a worker of the fault phase ended. */
  readonly ended: (end: WorkerEnd) => void
  /** Sends a signal to a worker (which may have ended already); its exit is then expected. */
  readonly signal: (pid: number, name: NodeJS.Signals) => void
  /** Resolves once the worker with this pid has exited. */
  readonly exitOf: (pid: number) => Promise<unknown>
}

/**
 * The lease of the scenarios where several workers contend for every key.
 * An owner whose renewals do not land stops at two thirds of its lease, so
 * the last third is what an effect it already sent has to land before
 * another owner may take the key over and check. Four workers, a database
 * and the remote share two cores here: a third of 3 s covers how late the
 * remote may read an effect under that load. (An effect that lands later
 * still is the late owner of the paused scenarios, which only a remote that
 * checks fences can refuse.)
 */
const lease = 3_000

/** The lease where one owner is paused on purpose and one other waits it out: nothing else runs. */
const pauseLease = 1_000

/**
 * Runs workers on every key at once, and waits for all of them to end. They
 * start calling together, once all have loaded, so that the CPU their start
 * costs does not starve the first ones past their leases.
 */
const together = async (context: ScenarioContext, skews: ReadonlyArray<string | undefined> = []) => {
  // A worker counts once it is ready, or once it has ended without being ready.
  const counted = new Set<number>()
  let go!: () => void
  const allReady = new Promise<void>((resolve) => (go = resolve))
  const count = (pid: number) => {
    counted.add(pid)
    if (counted.size === context.size.workers) go()
  }
  context.remote.hooks = { ...context.remote.hooks, onReady: (pid) => (count(pid), allReady) }
  const workers = Array.from({ length: context.size.workers }, (_, index) => {
    const skew = skews[index]
    const worker = context.worker(context.keys, skew === undefined ? {} : { skew })
    void worker.exited.then(() => count(worker.child.pid!))
    return worker
  })
  for (const end of await Promise.all(workers.map((worker) => worker.exited))) context.ended(end)
}

/** Counts down: true for the `n`-th call, once. */
const nth = (n: number) => {
  let seen = 0
  return () => ++seen === n
}

const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "SIGKILL of workers right after their effects",
    backends: ["sqlite", "postgres", "redis"],
    hit: { what: "workers were killed after their effects, and the keys reconciled", seen: (report) => report.applications === report.keys },
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: async (context) => {
      // A third of the applications kill the worker that made them, before it can record.
      let count = 0
      context.remote.hooks = { onApply: (_, pid) => (++count % 3 === 0 ? context.signal(pid, "SIGKILL") : undefined) }
      for (let round = 0; round < context.size.rounds; round++) await together(context)
    }
  },
  {
    name: "SIGTERM (graceful stop) while execute runs, the effect sent",
    backends: ["sqlite", "postgres", "redis"],
    hit: { what: "some keys are in doubt", seen: (report) => report.inDoubt > 0 },
    tool: { leaseMillis: lease, reconcile: false, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: async (context) => {
      // Every worker is stopped gracefully at its first application, its
      // finalizers run; it never reads the remote's answer.
      const stopped = new Set<number>()
      context.remote.hooks = {
        onApply: async (_, pid) => {
          if (stopped.has(pid)) return
          stopped.add(pid)
          context.signal(pid, "SIGTERM")
          await context.exitOf(pid)
        }
      }
      await together(context)
    }
  },
  {
    name: "alreadyApplied slower than the lease (4.5 s check, 2 s lease), no fault",
    backends: ["sqlite", "postgres", "redis"],
    // The effect takes 3 s to land: a check that starts after it was sent can end before it lands.
    tool: { leaseMillis: 2_000, reconcile: true, checkMillis: 4_500, fenced: false, effectMillis: 3_000 },
    run: (context) => together(context)
  },
  {
    name: "one worker's clock 5 s ahead and one 5 s behind (libfaketime), 3 s lease",
    backends: ["postgres", "redis"],
    hit: { what: "the workers' clocks were 5 s off", seen: (report) => report.clockSkewSeen >= 4_500 },
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 300 },
    run: async (context) => {
      for (let round = 0; round < context.size.rounds; round++) await together(context, ["+5s", "-5s"])
    }
  },
  {
    name: "an owner paused (SIGSTOP) past its lease with its effect on its way, fence-checking remote",
    backends: ["sqlite", "postgres", "redis"],
    hit: {
      what: "late owners were refused by the remote or failed with EffectTakenOver",
      seen: (report) => report.refused + (report.typedErrors.EffectTakenOver ?? 0) > 0
    },
    tool: { leaseMillis: pauseLease, reconcile: true, checkMillis: 0, fenced: true, effectMillis: 0 },
    run: (context) => pausedOwner(context)
  },
  {
    name: "an owner paused (SIGSTOP) past its lease with its effect on its way, remote without fences",
    backends: ["postgres"],
    limit: "fencing stops a late record, not a late effect: only a remote that checks the fence (or an idempotency key) refuses it",
    hit: { what: "the late effects landed, as documented", seen: (report) => report.duplicates > 0 },
    tool: { leaseMillis: pauseLease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: (context) => pausedOwner(context)
  },
  {
    name: "PostgreSQL immediate shutdown and restart during a run",
    backends: ["postgres"],
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: (context) => crashingTheServer(context)
  },
  {
    name: "Redis killed (SIGKILL) and restarted, append-only file on",
    backends: ["redis"],
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: (context) => crashingTheServer(context)
  },
  {
    name: "Redis without persistence",
    backends: ["redis"],
    redisPersistence: "none",
    applies: "never",
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: (context) => together(context)
  },
  {
    name: "every SQLite writer killed (SIGKILL) mid-run, the file checked",
    backends: ["sqlite"],
    tool: { leaseMillis: lease, reconcile: true, checkMillis: 0, fenced: false, effectMillis: 0 },
    run: async (context) => {
      for (let round = 0; round < context.size.rounds; round++) {
        const killNow = nth(Math.ceil(context.keys.length / 3))
        const workers = Array.from({ length: context.size.workers }, () => context.worker(context.keys))
        context.remote.hooks = {
          onApply: () => {
            if (killNow()) for (const worker of workers) context.signal(worker.child.pid!, "SIGKILL")
          }
        }
        for (const end of await Promise.all(workers.map((worker) => worker.exited))) context.ended(end)
        const integrity = context.store.integrity!()
        if (integrity !== "ok") throw new Error(`the SQLite file is damaged after its writers were killed: ${integrity}`)
      }
    }
  }
]

/** Each round, the store's server crashes and restarts at the application of half of the keys. */
const crashingTheServer = async (context: ScenarioContext) => {
  for (let round = 0; round < context.size.rounds; round++) {
    const crashNow = nth(Math.ceil(context.keys.length / 2))
    context.remote.hooks = {
      onApply: async () => {
        if (!crashNow()) return
        await context.store.server!.crash()
        await context.store.server!.start()
      }
    }
    await together(context)
  }
}

/**
 * Per key: worker A sends its effect and is paused (SIGSTOP) while the
 * effect is on its way; worker B waits out A's lease, takes the key over,
 * finds nothing applied yet, and applies; only then does A's effect land,
 * and A resume.
 */
const pausedOwner = async (context: ScenarioContext) => {
  // Paused one key at a time, so half of the keys are enough.
  for (const key of context.keys.slice(0, Math.ceil(context.keys.length / 2))) {
    let paused: number | undefined
    context.remote.hooks = {
      onArriving: async (_, pid) => {
        if (paused !== undefined) return
        paused = pid
        context.signal(pid, "SIGSTOP")
        // Only now does B start: A holds the claim, and stops renewing it.
        context.ended(await context.worker([key]).exited)
        context.signal(pid, "SIGCONT")
      }
    }
    context.ended(await context.worker([key]).exited)
  }
}

/** Runs one scenario on one backend and reports what the remote and the workers saw. */
export const runScenario = async (setting: Setting, name: string, backend: Backend, size: Size): Promise<ScenarioReport> => {
  const scenario = scenarios.find((candidate) => candidate.name === name)!
  copyFileSync(join(import.meta.dirname, "worker.ts"), join(setting.consumerDir, "fault-worker.ts"))
  const store = await startStore(backend, scenario.redisPersistence === undefined ? {} : { redisPersistence: scenario.redisPersistence })
  const remote = await startRemote()
  const keys = Array.from({ length: size.keys }, (_, index) => `${backend}-${scenario.name.slice(0, 12).replace(/\W/g, "")}-${index}`)
  const typedErrors: Record<string, number> = {}
  const untypedErrors: Array<string> = []
  const count = (end: WorkerEnd) => {
    for (const line of end.lines) {
      if (line.answer !== "error") continue
      if (line.tag === "untyped") untypedErrors.push(line.message ?? "")
      else typedErrors[line.tag!] = (typedErrors[line.tag!] ?? 0) + 1
    }
    if (end.signal === null && end.code !== 0 && !signalled.has(end.pid)) {
      untypedErrors.push(`a worker exited with code ${end.code}: ${end.stderr.slice(-500)}`)
    }
  }
  const signalled = new Set<number>()
  const exits = new Map<number, Promise<WorkerEnd>>()
  const config = (workerKeys: ReadonlyArray<string>): FaultWorkerConfig => ({
    backend,
    target: store.target,
    remote: remote.url,
    keys: workerKeys,
    ...scenario.tool
  })
  try {
    await scenario.run({
      size,
      keys,
      remote,
      store,
      worker: (workerKeys, options) => {
        const worker = spawnWorker(setting, config(workerKeys), options)
        exits.set(worker.child.pid!, worker.exited)
        return worker
      },
      exitOf: (pid) => exits.get(pid) ?? Promise.resolve(),
      ended: count,
      signal: (pid, name) => {
        signalled.add(pid)
        try {
          process.kill(pid, name)
        } catch {
          // it ended already
        }
      }
    })
    // The resolution phase: one clean worker calls every key once more.
    remote.hooks = {}
    const resolution = await spawnWorker(setting, config(keys)).exited
    count(resolution)
    const answered = new Map(resolution.lines.map((line) => [line.key, line]))
    const applications = [...remote.accepted.values()].reduce((sum, n) => sum + n, 0)
    return {
      scenario: scenario.name,
      backend,
      keys: keys.length,
      applications,
      duplicates: [...remote.accepted.values()].filter((n) => n > 1).length,
      inDoubt: resolution.lines.filter((line) => line.tag === "EffectInDoubt").length,
      typedErrors,
      untypedErrors,
      refused: remote.refused(),
      clockSkewSeen: remote.clockSkewSeen(),
      unresolved: keys.filter((key) => answered.get(key) === undefined).length,
      lost: keys.filter((key) => remote.accepted.get(key) === undefined && answered.get(key)?.tag !== "EffectInDoubt").length
    }
  } finally {
    remote.close()
    await store.dispose()
  }
}

/** Every scenario with the backends it runs on, and the documented limit it shows, if any. */
export const plan = scenarios.flatMap((scenario) =>
  scenario.backends.map((backend) => ({
    name: scenario.name,
    backend,
    limit: scenario.limit,
    applies: scenario.applies ?? "once",
    hit: scenario.hit
  }))
)
