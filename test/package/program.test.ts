import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { consumer, nodes, repositoryRoot, run } from "./consumer.ts"

/** The program of docs/getting-started.md, as a reader saves it. */
const gettingStartedProgram = () => {
  const page = readFileSync(join(repositoryRoot, "docs", "getting-started.md"), "utf8")
  const block = page.match(/```ts\n\/\/ file: notify\.ts\n([\s\S]*?)```/)
  if (block === null) throw new Error("docs/getting-started.md has no notify.ts block")
  return block[1]!
}

const outcomeOf = (stdout: string) => (JSON.parse(stdout.match(/^notify: (.*)$/m)![1]!) as { readonly outcome: string }).outcome

describe("the getting-started program, run from the installed package", () => {
  it("applies its effect tool once on SQLite, and a second process replays the record", async () => {
    const dir = join(consumer().dir, "getting-started")
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, "notify.ts"), gettingStartedProgram())

    const first = await run(nodes().oldest, ["notify.ts"], dir)
    expect(first.code, first.stderr).toBe(0)
    expect(outcomeOf(first.stdout)).toBe("applied")
    expect(first.stdout).toContain("outbox: 1 notification(s)")

    const second = await run(nodes().current, ["notify.ts"], dir)
    expect(second.code, second.stderr).toBe(0)
    expect(outcomeOf(second.stdout)).toBe("recorded")
    expect(second.stdout).toContain("outbox: 1 notification(s)")
    expect(existsSync(join(dir, "effects.db"))).toBe(true)
    expect(readFileSync(join(dir, "outbox.txt"), "utf8")).toBe("ada: Welcome aboard\n")
  })
})
