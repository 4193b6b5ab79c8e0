/**
 * At most once under faults, proven on the installed package: worker
 * processes on SQLite, PostgreSQL and Redis are killed, stopped gracefully,
 * paused past their leases and skewed, and the stores' servers are crashed,
 * while a remote counts every application. `FAULTS=full` runs the sizes of
 * docs/reliability.md; the report goes to test-output/reliability.json.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { missing } from "../support/services.ts"
import { consumer, nodes, repositoryRoot } from "./consumer.ts"
import { full, plan, quick, runScenario, type ScenarioReport } from "./faults/suite.ts"

const size = process.env.FAULTS === "full" ? full : quick
const noPostgres = missing("postgres")
const noRedis = missing("redis")
const reports: Array<ScenarioReport> = []

afterAll(() => {
  if (reports.length === 0) return
  const dir = join(repositoryRoot, "test-output")
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, "reliability.json"), JSON.stringify({ size, reports }, null, 2))
  // The table of docs/reliability.md.
  const rows = reports.map((report) =>
    `| ${report.scenario} | ${report.backend} | ${report.keys} | ${report.applications} | ${report.duplicates} | ${report.inDoubt} | ` +
    `${report.refused} | ${Object.entries(report.typedErrors).map(([tag, n]) => `${tag} ${n}`).join(", ") || "none"} | ${report.untypedErrors.length} |`
  )
  const table = [
    "| scenario | store | keys | applications | duplicates | in doubt | refused late effects | typed errors | untyped errors |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ...rows
  ].join("\n")
  writeFileSync(join(dir, "reliability.md"), `${table}\n`)
  console.log(table)
})

describe(`at most once under faults (${process.env.FAULTS === "full" ? "full" : "quick"} run)`, () => {
  for (const { name, backend, limit, applies, hit } of plan) {
    const skip = backend === "postgres" ? noPostgres : backend === "redis" ? noRedis : undefined
    const claim = limit !== undefined
      ? "every error typed, every key resolved; duplicates are the documented limit and are reported"
      : applies === "never"
      ? "the store refuses to start, typed, and nothing is applied"
      : "no key applied twice, every key applied once or in doubt, every error typed"
    it.skipIf(skip !== undefined)(`${name}, on ${backend}: ${claim}`, async () => {
      const report = await runScenario({ consumerDir: consumer().dir, node: nodes().current }, name, backend, size)
      reports.push(report)
      expect(report.untypedErrors).toEqual([])
      expect(report.unresolved).toBe(0)
      if (limit === undefined) expect(report.duplicates).toBe(0)
      if (applies === "never") {
        expect(report.applications).toBe(0)
        expect(Object.keys(report.typedErrors)).toEqual(["RedisPersistenceError"])
      } else if (limit === undefined) {
        expect(report.lost).toBe(0)
      }
      if (hit !== undefined) expect(hit.seen(report), hit.what).toBe(true)
    }, 600_000)
  }
})
