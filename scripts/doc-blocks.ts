/**
 * The TypeScript code blocks of README.md, docs/*.md and the `@example`
 * blocks of the TSDoc in src/, written out as files to type-check: by
 * `npm run typecheck` against the sources, and by the package suite against
 * the installed tarball.
 *
 * A block whose first line is `// file: NAME.ts` (or `.tsx`) is written under
 * that name, next to the other blocks of the same page, so that the blocks of
 * one page can import each other the way the files of an app do. docs/api is
 * generated from the TSDoc, whose examples are taken at their source.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'

export const root = join(import.meta.dirname, '..')

interface Block {
  readonly source: string
  readonly name: string
  readonly code: string
}

const fence = /```(ts|typescript|tsx)\n([\s\S]*?)```/g
const fileHeader = /^\/\/ file: (\S+\.tsx?)\n/

const blocksOfMarkdown = (path: string): Array<Block> =>
  [...readFileSync(path, 'utf8').matchAll(fence)].map((match, index) => {
    const code = match[2] ?? ''
    const named = code.match(fileHeader)
    const extension = match[1] === 'tsx' ? 'tsx' : 'ts'
    return { source: relative(root, path), name: named?.[1] ?? `block-${index + 1}.${extension}`, code }
  })

const blocksOfTsDoc = (path: string): Array<Block> =>
  [...readFileSync(path, 'utf8').matchAll(/\/\*\*([\s\S]*?)\*\//g)]
    .map((match) => (match[1] ?? '').split('\n').map((line) => line.replace(/^\s*\* ?/, '')).join('\n'))
    .flatMap((comment) => [...comment.matchAll(fence)].map((match) => match[2] ?? ''))
    .map((code, index) => ({ source: relative(root, path), name: `example-${index + 1}.ts`, code }))

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )

const documentedBlocks = (): Array<Block> => [
  ...[join(root, 'README.md'), ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => join(root, 'docs', name))]
    .flatMap(blocksOfMarkdown),
  ...sourceFiles(join(root, 'src')).flatMap(blocksOfTsDoc),
]

/**
 * Writes every documented block under `out` (emptied first), a folder per
 * page, and returns how many there are.
 */
export const writeDocumentedBlocks = (out: string): number => {
  const blocks = documentedBlocks()
  rmSync(out, { recursive: true, force: true })
  for (const block of blocks) {
    const dir = join(out, block.source.replace(/[/.]/g, '_'))
    mkdirSync(dir, { recursive: true })
    // Each block is a module of its own, so that two blocks may use one name.
    writeFileSync(join(dir, block.name), `${block.code}\nexport {}\n`)
  }
  return blocks.length
}
