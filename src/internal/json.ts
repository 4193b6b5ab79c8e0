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
  readonly isArray: boolean
  readonly keys: ReadonlyArray<string>
  readonly parts: Array<string>
  readonly parent: Frame | undefined
  /** The key of this value in its parent. */
  readonly label: string
  index: number
}

/** The path of `label` inside `parent`, as `$.a[0].b`. */
const pathOf = (parent: Frame | undefined, label: string): string => {
  const steps: Array<string> = []
  let step: string | undefined = label
  for (let at = parent; at !== undefined; at = at.parent) {
    if (step !== undefined) steps.push(at.isArray ? `[${step}]` : `.${step}`)
    step = at.parent === undefined ? undefined : at.label
  }
  return `$${steps.reverse().join("")}`
}

// Built-ins whose JSON form is `{}` whatever they hold.
const lossyBuiltins: ReadonlyArray<Function> = [Map, Set, WeakMap, WeakSet, RegExp, Promise]

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

const fail = (parent: Frame | undefined, label: string, reason: string): never => {
  throw new NotJsonError({ path: pathOf(parent, label), reason })
}

const ascii = /^[\x00-\x7f]*$/

/**
 * A string in Unicode NFC: "Zoë" typed as one code point or as "e" and a
 * combining diaeresis is one text, and must be one key. ASCII is already
 * NFC, and the test costs half of what `normalize` does.
 */
const nfc = (text: string): string => ascii.test(text) ? text : text.normalize("NFC")

/** Object keys in the order of their NFC forms, so that equal texts sort alike. */
const sortedKeys = (value: object): Array<string> => {
  const keys = Object.keys(value)
  if (keys.every((key) => ascii.test(key))) return keys.sort()
  return keys.map((key) => [nfc(key), key] as const).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([, key]) => key)
}

/** Left out of objects, `null` in arrays: what JSON does with undefined, functions and symbols. */
const omitted = Symbol()

const write = (root: unknown, normalize: boolean): string => {
  const ancestors = new Set<object>()
  const open = (input: unknown, parent: Frame | undefined, label: string): string | typeof omitted | Frame => {
    let value = input
    if (Predicate.isObject(value) && Predicate.hasProperty(value, "toJSON") && Predicate.isFunction(value.toJSON)) {
      value = value.toJSON()
    }
    if (Predicate.isBigInt(value)) return fail(parent, label, "a BigInt has no JSON form")
    if (value === undefined || Predicate.isFunction(value) || Predicate.isSymbol(value)) return omitted
    if (!Predicate.isObjectOrArray(value)) return JSON.stringify(normalize && Predicate.isString(value) ? nfc(value) : value)
    if (lossyBuiltins.some((builtin) => value instanceof builtin)) {
      return fail(parent, label, `a ${value.constructor.name} has no JSON form that keeps its contents`)
    }
    const isArray = Array.isArray(value)
    const keys = isArray ? Array.from((value as ReadonlyArray<unknown>).keys(), String) : normalize ? sortedKeys(value) : Object.keys(value)
    const prototype = Object.getPrototypeOf(value)
    if (!isArray && keys.length === 0 && prototype !== Object.prototype && prototype !== null) {
      return fail(parent, label, "a class instance with no enumerable property and no toJSON would be written as {}")
    }
    if (ancestors.has(value)) return fail(parent, label, "the value refers to itself (a cycle)")
    ancestors.add(value)
    return { value, isArray, keys, parts: [], parent, label, index: 0 }
  }
  const close = (frame: Frame): string => {
    ancestors.delete(frame.value)
    return frame.isArray ? `[${frame.parts.join(",")}]` : `{${frame.parts.join(",")}}`
  }
  const append = (frame: Frame, key: string, text: string | typeof omitted) => {
    if (frame.isArray) frame.parts.push(text === omitted ? "null" : text)
    else if (text !== omitted) frame.parts.push(`${JSON.stringify(normalize ? nfc(key) : key)}:${text}`)
  }

  const first = open(root, undefined, "")
  if (first === omitted) return "null"
  if (Predicate.isString(first)) return first
  let frame: Frame = first
  for (;;) {
    if (frame.index < frame.keys.length) {
      const key = frame.keys[frame.index++]!
      const child = open((frame.value as Record<string, unknown>)[key], frame, key)
      if (child === omitted || Predicate.isString(child)) append(frame, key, child)
      else frame = child
      continue
    }
    const text = close(frame)
    if (frame.parent === undefined) return text
    append(frame.parent, frame.label, text)
    frame = frame.parent
  }
}

/** The canonical JSON of a value, or why it has none. */
export const writeCanonical = (value: unknown): Result.Result<string, NotJson> => walk(value, true)

const walk = (value: unknown, normalize: boolean): Result.Result<string, NotJson> => {
  try {
    return Result.succeed(write(value, normalize))
  } catch (error) {
    if (error instanceof NotJsonError) return Result.fail(error.problem)
    throw error
  }
}

/** Why a value is not JSON (a BigInt, a cycle, a Map...), or undefined when it is. */
export const notJson = (value: unknown): string | undefined => {
  // Only whether it has a JSON form: no need to sort or normalize.
  const json = walk(value, false)
  return Result.isSuccess(json) ? undefined : `the result is not JSON: ${json.failure.reason} at ${json.failure.path}`
}
