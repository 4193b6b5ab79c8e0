import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { writeDocumentedBlocks } from "../../scripts/doc-blocks.ts"
import { consumer, repositoryRoot, run } from "./consumer.ts"

const typeScripts = {
  pinned: join(repositoryRoot, "node_modules", "typescript", "bin", "tsc"),
  oldest: () => join(consumer().dir, "node_modules", "typescript", "bin", "tsc")
}

const shared = {
  target: "ES2022",
  lib: ["ESNext", "DOM", "DOM.Iterable"],
  jsx: "react-jsx",
  types: ["node"],
  strict: true,
  skipLibCheck: false,
  noEmit: true,
  allowImportingTsExtensions: true
}

/** Writes every documented block into the consumer project with a tsconfig of its own, and type-checks them. */
const checkDocumentedBlocks = async (name: string, tsc: string, compilerOptions: Record<string, unknown>) => {
  const dir = join(consumer().dir, name)
  const count = writeDocumentedBlocks(dir)
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { ...shared, ...compilerOptions }, include: ["**/*.ts", "**/*.tsx"] }))
  const checked = await run(process.execPath, [tsc, "-p", join(dir, "tsconfig.json")])
  return { count, checked }
}

describe("the documented code blocks, against the installed package (skipLibCheck: false)", () => {
  it("type-check under module nodenext with the repository's strictest options, on the pinned TypeScript", async () => {
    const { count, checked } = await checkDocumentedBlocks("docs-nodenext", typeScripts.pinned, {
      module: "NodeNext",
      moduleResolution: "NodeNext",
      verbatimModuleSyntax: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true
    })
    expect(checked.stdout + checked.stderr).toBe("")
    expect(checked.code).toBe(0)
    expect(count).toBeGreaterThan(90)
  })

  it("type-check under moduleResolution bundler on the oldest supported TypeScript", async () => {
    const { checked } = await checkDocumentedBlocks("docs-bundler", typeScripts.oldest(), {
      module: "ESNext",
      moduleResolution: "Bundler"
    })
    expect(checked.stdout + checked.stderr).toBe("")
    expect(checked.code).toBe(0)
  })
})

describe("the oldest supported TypeScript", () => {
  it("builds the package", async () => {
    const outDir = join(consumer().dir, "build-with-oldest-typescript")
    const built = await run(process.execPath, [typeScripts.oldest(), "-p", join(repositoryRoot, "tsconfig.build.json"), "--outDir", outDir])
    expect(built.stdout + built.stderr).toBe("")
    expect(built.code).toBe(0)
  })
})
