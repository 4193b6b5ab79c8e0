/**
 * Runs worker processes against a shared store, with the remote system they
 * apply effects to: an HTTP counter on 127.0.0.1.
 */
import { spawn } from "node:child_process"
import { once } from "node:events"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import type { WorkerConfig, WorkerReport } from "./worker.ts"

export interface Remote {
  readonly url: string
  /** Applications per key. */
  readonly applied: Map<string, number>
  readonly appliedOf: (keys: ReadonlyArray<string>) => number
  readonly close: () => void
}

/** The remote system the workers apply effects to: it counts applications per key. */
export const startRemote = async (): Promise<Remote> => {
  const applied = new Map<string, number>()
  const server = createServer((req, res) => {
    const [, action, key = ""] = req.url!.split("/")
    if (req.method === "POST" && action === "apply") applied.set(key, (applied.get(key) ?? 0) + 1)
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify({ applied: applied.get(key) ?? 0 }))
  })
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    applied,
    appliedOf: (keys) => keys.reduce((sum, key) => sum + (applied.get(key) ?? 0), 0),
    close: () => {
      server.closeAllConnections()
      server.close()
    }
  }
}

export interface WorkerExit {
  readonly report: WorkerReport | undefined
  readonly signal: NodeJS.Signals | null
}

/** Runs one worker process to its end. */
export const runWorker = async (config: WorkerConfig): Promise<WorkerExit> => {
  const child = spawn(process.execPath, ["--conditions=@tanstack/ai-effect/source", join(import.meta.dirname, "worker.ts")], {
    env: { ...process.env, AI_EFFECT_WORKER: JSON.stringify(config) },
    stdio: ["ignore", "pipe", "inherit"]
  })
  let output = ""
  child.stdout.on("data", (part: Buffer) => (output += part.toString()))
  const [, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null]
  const line = output.trim().split("\n").at(-1)
  return { report: line ? JSON.parse(line) as WorkerReport : undefined, signal }
}
