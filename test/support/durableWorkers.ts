/**
 * Runs a durable-run worker process (durable-worker.ts) and reads what it
 * prints: the lines it prints while the run runs, and the run's exit.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { join } from "node:path"
import type { DurableWorkerConfig } from "./durable-worker.ts"

export const startDurableWorker = (config: DurableWorkerConfig) => {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--conditions=@tanstack/ai-effect/source", join(import.meta.dirname, "durable-worker.ts")],
    {
      // A single runner reads its address from PORT, as on a platform that sets it for the HTTP server.
      env: { ...process.env, AI_EFFECT_DURABLE_WORKER: JSON.stringify(config), ...(config.runner === undefined ? {} : { PORT: String(config.runner.port) }) },
      stdio: ["ignore", "pipe", "inherit"]
    }
  )
  let output = ""
  const waiting: Array<{ readonly line: string; readonly seen: () => void }> = []
  child.stdout!.on("data", (part: Buffer) => {
    output += part.toString()
    for (const wait of waiting) if (output.includes(wait.line)) wait.seen()
  })
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>
  return {
    child,
    exited,
    /** Resolves once the worker printed the line. */
    printed: (line: string) =>
      new Promise<void>((resolve) => {
        if (output.includes(line)) resolve()
        else waiting.push({ line, seen: resolve })
      }),
    /** The run's exit, as the worker printed it when the run finished. */
    exit: async () => {
      await exited
      return JSON.parse(output.trim().split("\n").at(-1)!) as { readonly _tag: string; readonly value: { readonly text: string } }
    }
  }
}
