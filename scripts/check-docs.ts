/**
 * Type-checks every documented code block (see doc-blocks.ts) against the
 * sources, through the package's source condition, so that no documented
 * snippet rots. The package suite checks the same blocks against the packed
 * tarball.
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { root, writeDocumentedBlocks } from './doc-blocks.ts'

const out = join(root, '.docs-check')
const count = writeDocumentedBlocks(out)
writeFileSync(
  join(out, 'tsconfig.json'),
  JSON.stringify({
    extends: '../tsconfig.json',
    // Snippets show an API, not a whole program: a name they declare and do
    // not use is not a mistake there.
    compilerOptions: { noUnusedLocals: false, noUnusedParameters: false },
    include: ['**/*.ts', '**/*.tsx'],
  }),
)

try {
  execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['--noEmit', '-p', join(out, 'tsconfig.json')], { stdio: 'inherit' })
} catch {
  console.error(`\nA documented code block does not type-check (files under ${basename(out)}/ name the page).`)
  process.exit(1)
}
console.log(`Type-checked ${count} code blocks of README.md, docs/ and the TSDoc of src/.`)
