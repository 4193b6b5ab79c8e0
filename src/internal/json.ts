/**
 * Canonical JSON: object keys sorted, `undefined` dropped, `toJSON` honoured,
 * strings (keys among them) in Unicode NFC, and a clear reason where a value
 * has no JSON form that keeps what it holds.
 * Effect keys hash it (`EffectKey.canonicalJson`); a tool's result must have
 * it to go to the model and into a record.
 */
import { Predicate, Result } from "effect"

/** An object or array being written: its keys, how far the walk is, and what it has written. */
interface Frame {
  readonly value: object
  /** The object's keys in the order they are written; undefined for an array. */
  readonly keys: ReadonlyArray<string> | undefined
  readonly length: number
  readonly parent: Frame | undefined
  /** The key or index of this value in its parent. */
  readonly label: string | number
  index: number
  /** The opening bracket and the members or items written so far. */
  text: string
}

/** The path of `label` inside `parent`, as `$.a[0].b`. */
const pathOf = (parent: Frame | undefined, label: string | number): string => {
  const steps: Array<string> = []
  let step: string | number | undefined = label
  for (let at = parent; at !== undefined; at = at.parent) {
    if (step !== undefined) steps.push(at.keys === undefined ? `[${step}]` : `.${step}`)
    step = at.parent === undefined ? undefined : at.label
  }
  return `$${steps.reverse().join("")}`
}

// Built-ins whose JSON form is `{}` whatever they hold.
const lossyBuiltins: ReadonlyArray<Function> = [Map, Set, WeakMap, WeakSet, RegExp, Promise]

const isLossy = (value: object): boolean => {
  for (const builtin of lossyBuiltins) {
    if (value instanceof builtin) return true
  }
  return false
}

/** Why a value has no canonical JSON, and where in it. */
export interface NotJson {
  readonly path: string
  readonly reason: string
}

/** Thrown by the walk, caught by {@link writeCanonical}. */
class NotJsonError {
  readonly problem: NotJson
  constructor(problem: NotJson) {
    this.problem = problem
  }
}

const fail = (parent: Frame | undefined, label: string | number, reason: string): never => {
  throw new NotJsonError({ path: pathOf(parent, label), reason })
}

const ascii = /^[\x00-\x7f]*$/

/**
 * A string in Unicode NFC: "Zoë" typed as one code point or as "e" and a
 * combining diaeresis is one text, and must be one key. ASCII is already
 * NFC, and the test costs half of what `normalize` does.
 */
const nfc = (text: string): string => ascii.test(text) ? text : text.normalize("NFC")

// Printable ASCII without a quote or a backslash: its JSON is itself in quotes.
const quotedAsIs = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** Object keys in the order of their NFC forms, so that equal texts sort alike. */
const sortedKeys = (value: object): Array<string> => {
  const keys = Object.keys(value)
  for (const key of keys) {
    if (!ascii.test(key)) {
      return keys.map((key) => [nfc(key), key] as const).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([, key]) => key)
    }
  }
  return keys.sort()
}

/** Left out of objects, `null` in arrays: what JSON does with undefined, functions and symbols. */
const omitted = Symbol()

/**
 * One walk's state. The walk keeps its own stack of frames, so that no
 * nesting depth can overflow the call stack; its steps are methods, made
 * once rather than as closures on every walk.
 */
class Walk {
  /** Whether the walk writes the canonical text, or only checks that there is one. */
  readonly writes: boolean
  /** The objects open on the path from the root, to find a cycle. */
  readonly ancestors = new Set<object>()
  constructor(writes: boolean) {
    this.writes = writes
  }

  /** A string's JSON text, in NFC. */
  quote(text: string): string {
    return quotedAsIs.test(text) ? `"${text}"` : JSON.stringify(nfc(text))
  }

  /** A value's JSON text, `omitted`, or a frame for an object or array to walk into. */
  open(input: unknown, parent: Frame | undefined, label: string | number): string | typeof omitted | Frame {
    let value = input
    if (Predicate.isObject(value) && Predicate.hasProperty(value, "toJSON") && Predicate.isFunction(value.toJSON)) {
      value = value.toJSON()
    }
    if (Predicate.isBigInt(value)) return fail(parent, label, "a BigInt has no JSON form")
    if (value === undefined || Predicate.isFunction(value) || Predicate.isSymbol(value)) return omitted
    if (!Predicate.isObjectOrArray(value)) {
      if (!this.writes) return ""
      return Predicate.isString(value) ? this.quote(value) : JSON.stringify(value)
    }
    const prototype = Object.getPrototypeOf(value)
    // A plain object or array is none of the lossy built-ins.
    const isPlain = prototype === Object.prototype || prototype === Array.prototype || prototype === null
    if (!isPlain && isLossy(value)) {
      return fail(parent, label, `a ${value.constructor.name} has no JSON form that keeps its contents`)
    }
    if (this.ancestors.has(value)) return fail(parent, label, "the value refers to itself (a cycle)")
    if (Array.isArray(value)) {
      this.ancestors.add(value)
      return { value, keys: undefined, length: value.length, parent, label, index: 0, text: "[" }
    }
    const keys = this.writes ? sortedKeys(value) : Object.keys(value)
    if (keys.length === 0 && prototype !== Object.prototype && prototype !== null) {
      return fail(parent, label, "a class instance with no enumerable property and no toJSON would be written as {}")
    }
    this.ancestors.add(value)
    return { value, keys, length: keys.length, parent, label, index: 0, text: "{" }
  }

  /** Adds a child's text to its frame: an item of an array, or a member of an object unless omitted. */
  append(frame: Frame, label: string | number, text: string | typeof omitted): void {
    if (!this.writes) return
    const separator = frame.text.length > 1 ? "," : ""
    if (frame.keys === undefined) frame.text += separator + (text === omitted ? "null" : text)
    else if (text !== omitted) {
      frame.text += `${separator}${this.quote(String(label))}:${text}`
    }
  }

  /** The canonical JSON of `root`; a walk that only checks answers a text of no use, and fails where `root` has no JSON form. */
  write(root: unknown): string {
    const first = this.open(root, undefined, "")
    if (first === omitted) return "null"
    if (Predicate.isString(first)) return first
    let frame: Frame = first
    for (;;) {
      if (frame.index < frame.length) {
        const index = frame.index++
        const label = frame.keys === undefined ? index : frame.keys[index]!
        const child = this.open((frame.value as Record<string | number, unknown>)[label], frame, label)
        if (child === omitted || Predicate.isString(child)) this.append(frame, label, child)
        else frame = child
        continue
      }
      this.ancestors.delete(frame.value)
      const text = frame.text + (frame.keys === undefined ? "]" : "}")
      if (frame.parent === undefined) return text
      this.append(frame.parent, frame.label, text)
      frame = frame.parent
    }
  }
}

/** The canonical JSON of a value, or why it has none. */
export const writeCanonical = (value: unknown): Result.Result<string, NotJson> => walk(value, true)

const walk = (value: unknown, writes: boolean): Result.Result<string, NotJson> => {
  try {
    return Result.succeed(new Walk(writes).write(value))
  } catch (error) {
    if (error instanceof NotJsonError) return Result.fail(error.problem)
    throw error
  }
}

/** Why a value is not JSON (a BigInt, a cycle, a Map...), or undefined when it is. */
export const notJson = (value: unknown): string | undefined => {
  // Only whether it has a JSON form: no text to sort, normalize or write.
  const json = walk(value, false)
  return Result.isSuccess(json) ? undefined : `the result is not JSON: ${json.failure.reason} at ${json.failure.path}`
}
