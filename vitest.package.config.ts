import { defineConfig } from "vitest/config"

// The package suite: the packed tarball installed in a project of its own.
// Nothing here resolves the package's source condition; the tests run the
// consumer project's own processes against what npm installed.
export default defineConfig({
  test: {
    include: ["test/package/**/*.test.ts"],
    globalSetup: ["test/package/setup.ts"],
    // One file at a time: the fault suite's leases are short, and the type
    // checks would otherwise compete with its workers for two cores.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 300_000
  }
})
