/**
 * The compiler behind `AI.toolSchema`: an Effect Schema as the JSON Schema a
 * model reads (OpenAI's strict subset by default), and arguments as a strict
 * provider sends them, read back for decoding.
 */
import { Array as Arr, JsonSchema, Predicate, Result, Schema, SchemaAST, SchemaRepresentation } from "effect"

/** Why a schema cannot be sent to a model, where, and what to change. */
export interface Problem {
  readonly path: string
  readonly reason: string
  readonly remedy: string
}

/** Thrown inside the recursive walk, and caught at its top. */
class UnusableSchema {
  readonly problem: Problem
  constructor(problem: Problem) {
    this.problem = problem
  }
}

/** A node outside OpenAI's strict subset, which `{ strict: false }` can still send. */
const notStrict = (path: string, reason: string) =>
  new UnusableSchema({
    path,
    reason: `${reason} in strict mode`,
    remedy: "Change the schema, or pass { strict: false } to AI.toolSchema to send it without strict mode."
  })

// ---------------------------------------------------------------------------
// JSON Schema for the model
// ---------------------------------------------------------------------------

type Node = Record<string, unknown>

const nonFiniteStrings = ["Infinity", "-Infinity", "NaN"]

/**
 * The JSON Schema the model is told, in OpenAI's strict subset when
 * `strict`; or the first node that cannot be sent, with what to change.
 */
export const toModelJsonSchema = (schema: Schema.Constraint, strict: boolean): Result.Result<JsonSchema.JsonSchema, Problem> => {
  try {
    const document = JsonSchema.toDocumentDraft07(
      Schema.toJsonSchemaDocument(Schema.make(forModel(schema.ast)), { onExcessProperty: "error" })
    )
    const out = rewrite(document.schema, "$", document.definitions, new Set())
    if (strict) assertStrict(out, "$")
    return Result.succeed(out)
  } catch (error) {
    if (error instanceof UnusableSchema) return Result.fail(error.problem)
    throw error
  }
}

// ---------------------------------------------------------------------------
// What the model is told
// ---------------------------------------------------------------------------

/**
 * The schema as the model should read it. Effect's JSON Schema is made to
 * accept every value the schema accepts, so it leaves out or loosens the
 * checks it cannot state exactly; a model is better told the schema's own
 * numbers, since decoding enforces every check anyway.
 *
 * - A `Schema.Number` is offered as a finite number, so its bounds go out
 *   (Effect would send a union with `"NaN"` and `"Infinity"`, without them).
 * - A string length goes out as written: JSON Schema counts code points where
 *   JavaScript counts UTF-16 units, so Effect halves a minimum; a string of n
 *   code points is at least n units long, so n itself is safe to ask for.
 * - A pattern goes out when JSON Schema reads it as JavaScript does: without
 *   the `i`, `m`, `s` or `v` flags, and valid in Unicode mode.
 *
 * Memoized per node, so that a recursive schema maps to a recursive schema.
 */
const forModel = (ast: SchemaAST.AST): SchemaAST.AST => {
  const done = new Map<SchemaAST.AST, SchemaAST.AST>()
  const links = (encoding: SchemaAST.Encoding | undefined): SchemaAST.Encoding | undefined =>
    encoding && Arr.map(encoding, (link) => new SchemaAST.Link(recur(link.to), link.transformation))
  const recur = (node: SchemaAST.AST): SchemaAST.AST => {
    const known = done.get(node)
    if (known !== undefined) return known
    const checks = modelChecks(node.checks)
    const encoding = links(node.encoding)
    let out: SchemaAST.AST
    switch (node._tag) {
      case "Number":
        out = node.encoding === undefined && !isFiniteNumber(node)
          ? new SchemaAST.Number(node.annotations, [Schema.isFinite(), ...(checks ?? [])], undefined, node.context)
          : new SchemaAST.Number(node.annotations, checks, encoding, node.context)
        break
      case "String":
        out = new SchemaAST.String(node.annotations, checks, encoding, node.context)
        break
      case "Objects":
        out = new SchemaAST.Objects(
          node.propertySignatures.map((property) => new SchemaAST.PropertySignature(property.name, recur(property.type))),
          node.indexSignatures.map((index) => new SchemaAST.IndexSignature(index.parameter, recur(index.type))),
          node.annotations, checks, encoding, node.context, node.encodingChecks
        )
        break
      case "Arrays":
        out = new SchemaAST.Arrays(
          node.isMutable, node.elements.map(recur), node.rest.map(recur),
          node.annotations, checks, encoding, node.context, node.encodingChecks
        )
        break
      case "Union":
        out = new SchemaAST.Union(node.types.map(recur), node.options, node.annotations, checks, encoding, node.context, node.encodingChecks)
        break
      case "Suspend": {
        const thunk = node.thunk
        out = new SchemaAST.Suspend(() => recur(thunk()), node.annotations, checks, encoding, node.context)
        break
      }
      case "Declaration":
        out = new SchemaAST.Declaration(
          node.typeParameters.map(recur), node.run,
          node.annotations, checks, encoding, node.context, node.encodingChecks, node.encodingRun
        )
        break
      default:
        out = node
    }
    done.set(node, out)
    return out
  }
  return recur(ast)
}

const representationId = (check: SchemaAST.Check<unknown>): string | undefined => check.annotations?.representation?.id

const isFiniteNumber = (node: SchemaAST.AST): boolean =>
  node.checks?.some((check) => {
    const id = representationId(check)
    return id === "effect/schema/isFinite" || id === "effect/schema/isInt"
  }) ?? false

const modelChecks = (checks: SchemaAST.Checks | undefined): SchemaAST.Checks | undefined =>
  checks && Arr.map(checks, modelCheck)

const modelCheck = (check: SchemaAST.Check<unknown>): SchemaAST.Check<unknown> => {
  if (check._tag === "FilterGroup") {
    return new SchemaAST.FilterGroup(Arr.map(check.checks, modelCheck), check.annotations)
  }
  const payload = check.annotations?.representation?.payload
  if (!isNode(payload)) return check
  const effectOwn = check.annotations?.toJsonSchema
  const onStrings = (fragment: JsonSchema.JsonSchema): SchemaRepresentation.ToJsonSchema.Check => (input) =>
    input.type === "string" || effectOwn === undefined ? fragment : effectOwn(input)
  switch (representationId(check)) {
    case "effect/schema/isMinLength":
      return check.annotate({ toJsonSchema: onStrings({ minLength: payload.minLength }) })
    case "effect/schema/isMaxLength":
      return check.annotate({ toJsonSchema: onStrings({ maxLength: payload.maxLength }) })
    case "effect/schema/isBetweenLength":
      return check.annotate({ toJsonSchema: onStrings({ minLength: payload.minimum, maxLength: payload.maximum }) })
    case "effect/schema/isPattern": {
      const pattern = modelPattern(String(payload.source), String(payload.flags))
      return pattern === undefined ? check : check.annotate({ toJsonSchema: () => ({ pattern }) })
    }
    default:
      return check
  }
}

/** The pattern as JSON Schema states it, when it means there what it means in JavaScript. */
const modelPattern = (source: string, flags: string): string | undefined => {
  if (!/^[dgyu]*$/.test(flags)) return undefined
  try {
    new RegExp(source, "u")
  } catch {
    return undefined
  }
  return flags.includes("y") ? `^(?:${source})` : source
}

const isNode: (u: unknown) => u is Node = Predicate.isObject

/** Inlines definitions, turns `oneOf` into `anyOf` and drops non-finite number strings. */
const rewrite = (
  node: unknown,
  path: string,
  definitions: Record<string, JsonSchema.JsonSchema>,
  visiting: ReadonlySet<string>
): Node => {
  if (!isNode(node)) return {}
  if (isEmptyStruct(node)) return { ...emptyObject }
  const ref = node["$ref"]
  if (Predicate.isString(ref)) {
    const name = decodeURIComponent(ref.replace(/^#\/definitions\//, ""))
    const target = definitions[name]
    if (target === undefined) {
      throw new UnusableSchema({
        path,
        reason: `the reference ${ref} is not defined`,
        remedy: "Effect's JSON Schema of it is incomplete; please report the schema."
      })
    }
    if (visiting.has(name)) {
      throw new UnusableSchema({
        path,
        reason: `the definition ${name} is recursive, and tool schemas are sent with their definitions inlined`,
        remedy: "Nest the recursion to a fixed depth instead."
      })
    }
    const { $ref: _ref, ...siblings } = node
    return { ...rewrite(target, path, definitions, new Set([...visiting, name])), ...siblings }
  }
  const out: Node = {}
  const checks: Array<Node> = []
  for (const [key, value] of Object.entries(node)) {
    if (key === "properties" && isNode(value)) {
      out.properties = Object.fromEntries(
        Object.entries(value).map(([name, child]) => [
          name,
          rewrite(child, `${path}.${name}`, definitions, visiting)
        ])
      )
    } else if ((key === "anyOf" || key === "oneOf") && Array.isArray(value)) {
      const variants = value
        .filter((variant) => !isNonFiniteNumberStrings(variant))
        .map((variant, i) => rewrite(variant, `${path}|${i}`, definitions, visiting))
      if (variants.length === 1) Object.assign(out, variants[0])
      else out.anyOf = variants
    } else if (key === "allOf" && Array.isArray(value) && value.every(isConstraintOnly)) {
      checks.push(...value)
    } else if (key === "items" && Array.isArray(value)) {
      // A tuple, in the form OpenAI reads (JSON Schema 2020-12). Draft-07's
      // array-form `items` would pass the OpenAI adapter's strict check, and
      // the provider would then refuse the tool.
      out.prefixItems = value.map((item, i) => rewrite(item, `${path}[${i}]`, definitions, visiting))
    } else if (key === "additionalItems") {
      out.items = isNode(value) ? rewrite(value, `${path}[]`, definitions, visiting) : value
    } else if (key === "items" || key === "additionalProperties") {
      out[key] = isNode(value) ? rewrite(value, `${path}[]`, definitions, visiting) : value
    } else {
      out[key] = value
    }
  }
  return mergeConstraints(out, checks)
}

/** Several checks of one value: keywords that say nothing of the value's shape, only bounds and patterns. */
const constraintKeywords = new Set([
  "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
  "multipleOf", "minItems", "maxItems", "description", "title"
])
const lowerBounds = new Set(["minLength", "minimum", "exclusiveMinimum", "minItems"])
const upperBounds = new Set(["maxLength", "maximum", "exclusiveMaximum", "maxItems"])

const isConstraintOnly = (u: unknown): u is Node => isNode(u) && Object.keys(u).every((key) => constraintKeywords.has(key))

/**
 * One node for several checks, which strict mode takes where it refuses
 * `allOf`: the tightest of each bound, and the first of anything else (a
 * second pattern stays with the decoder, which enforces it).
 */
const mergeConstraints = (node: Node, fragments: ReadonlyArray<Node>): Node => {
  const out: Node = { ...node }
  for (const fragment of fragments) {
    for (const [key, value] of Object.entries(fragment)) {
      const current = out[key]
      if (current === undefined) out[key] = value
      else if (lowerBounds.has(key)) out[key] = Math.max(Number(current), Number(value))
      else if (upperBounds.has(key)) out[key] = Math.min(Number(current), Number(value))
    }
  }
  return out
}

/** Effect describes an empty struct as "anything but null"; a tool takes it as an object without keys. */
const isEmptyStruct = (u: unknown): boolean =>
  isNode(u) && Object.keys(u).length === 1 && isNode(u.not) && u.not.type === "null" && Object.keys(u.not).length === 1

const emptyObject: Node = { type: "object", properties: {}, required: [], additionalProperties: false }

const isNonFiniteNumberStrings = (u: unknown): boolean =>
  isNode(u) && u.type === "string" && Array.isArray(u.enum) &&
  u.enum.length === nonFiniteStrings.length && u.enum.every((value) => nonFiniteStrings.includes(value as string))

const typeKeywords = ["type", "enum", "const", "anyOf"]
const unsupportedKeywords = ["allOf", "not", "patternProperties", "propertyNames", "if", "dependentSchemas"]

/** Throws `UnusableSchema` at the first node outside OpenAI's strict subset. */
const assertStrict = (node: Node, path: string): void => {
  if (!typeKeywords.some((key) => key in node)) {
    throw notStrict(path, "a value of any type (such as Schema.Unknown) has no JSON type")
  }
  for (const key of unsupportedKeywords) {
    if (key in node) throw notStrict(path, `the keyword "${key}" is not supported`)
  }
  if ("prefixItems" in node) {
    throw notStrict(path, "tuples are not supported; use a struct with named fields")
  }
  const isObject = node.type === "object" || (Array.isArray(node.type) && node.type.includes("object"))
  if (isObject && (node.additionalProperties !== false || !isNode(node.properties))) {
    throw notStrict(path, "records and open objects are not supported; use a struct")
  }
  if (isNode(node.properties)) {
    for (const [name, child] of Object.entries(node.properties)) assertStrict(child as Node, `${path}.${name}`)
  }
  if (isNode(node.items)) assertStrict(node.items, `${path}[]`)
  if (Array.isArray(node.anyOf)) node.anyOf.forEach((variant: Node, i) => assertStrict(variant, `${path}|${i}`))
}

// ---------------------------------------------------------------------------
// Arguments from the model
// ---------------------------------------------------------------------------

const acceptsNull = (node: unknown): boolean =>
  isNode(node) && (
    node.type === "null" ||
    (Array.isArray(node.type) && node.type.includes("null")) ||
    (Array.isArray(node.enum) && node.enum.includes(null)) ||
    (Array.isArray(node.anyOf) && node.anyOf.some(acceptsNull))
  )

/**
 * Drops `null` from optional keys whose schema does not accept `null`: strict
 * providers must send every key, and send `null` for the ones they leave out.
 */
export const dropAbsentNulls = (value: unknown, node: unknown): unknown => {
  if (!isNode(node)) return value
  if (Array.isArray(value)) {
    return isNode(node.items) ? value.map((item) => dropAbsentNulls(item, node.items)) : value
  }
  if (!isNode(value) || !isNode(node.properties)) return value
  const required = Array.isArray(node.required) ? node.required : []
  const out: Node = {}
  for (const [key, child] of Object.entries(value)) {
    const property = node.properties[key]
    if (child === null && property !== undefined && !required.includes(key) && !acceptsNull(property)) continue
    out[key] = dropAbsentNulls(child, property)
  }
  return out
}
