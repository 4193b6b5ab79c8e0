/**
 * Type-checks every TypeScript code block of README.md and docs/*.md, and the
 * `@example` blocks of the TSDoc in src/, so that no documented snippet rots.
 *
 * Each block becomes a file under .docs-check/. A block whose first line is
 * `// file: NAME.ts` (or `.tsx`) is written under that name, next to the other
 * blocks of the same page, so that the blocks of one page can import each
 * other the way the files of an app do. docs/api is generated from the TSDoc,
 * whose examples are checked at their source.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, relative } from 'node:path'

const root = join(import.meta.dirname, '..')
const out = join(root, '.docs-check')

interface Block {
  readonly source: string
  readonly name: string
  readonly code: string
}

const fence = /```(ts|typescript|tsx)\n([\s\S]*?)```/g
const fileHeader = /^\/\/ file: (\S+\.tsx?)\n/

function blocksOfMarkdown(path: string): Array<Block> {
  const text = readFileSync(path, 'utf8')
  return [...text.matchAll(fence)].map((match, index) => {
    const code = match[2] ?? ''
    const named = code.match(fileHeader)
    const extension = match[1] === 'tsx' ? 'tsx' : 'ts'
    return { source: relative(root, path), name: named?.[1] ?? `block-${index + 1}.${extension}`, code }
  })
}

function blocksOfTsDoc(path: string): Array<Block> {
  const text = readFileSync(path, 'utf8')
  const comments = [...text.matchAll(/\/\*\*([\s\S]*?)\*\//g)].map((match) =>
    (match[1] ?? '').split('\n').map((line) => line.replace(/^\s*\* ?/, '')).join('\n'),
  )
  return comments.flatMap((comment) => [...comment.matchAll(fence)].map((match) => match[2] ?? ''))
    .map((code, index) => ({ source: relative(root, path), name: `example-${index + 1}.ts`, code }))
}

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )

const docs = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join(root, 'docs', name))
const blocks = [
  ...[join(root, 'README.md'), ...docs].flatMap(blocksOfMarkdown),
  ...sourceFiles(join(root, 'src')).flatMap(blocksOfTsDoc),
]

rmSync(out, { recursive: true, force: true })
for (const block of blocks) {
  const dir = join(out, block.source.replace(/[/.]/g, '_'))
  mkdirSync(dir, { recursive: true })
  // Each block is a module of its own, so that two blocks may use one name.
  writeFileSync(join(dir, block.name), `${block.code}\nexport {}\n`)
}
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
console.log(`Type-checked ${blocks.length} code blocks of README.md, docs/ and the TSDoc of src/.`)
