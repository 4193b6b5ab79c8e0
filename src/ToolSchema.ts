/**
 * Effect Schemas as TanStack AI tool schemas.
 *
 * `toolSchema` turns an Effect `Schema` into a value that core
 * `toolDefinition` accepts as `inputSchema` or `outputSchema`. The value is
 * both a Standard Schema (core validates tool arguments with it) and a Standard
 * JSON Schema (core sends it to the provider). Arguments are decoded with the
 * schema's canonical JSON codec, so what the model is told and what the tool
 * accepts come from the same derivation.
 *
 * The JSON Schema is made for OpenAI strict mode: every object is closed,
 * named definitions are inlined, `oneOf` becomes `anyOf`, and Effect's
 * non-finite number strings (`"NaN"`, `"Infinity"`) are not offered to the
 * model. A schema that strict mode cannot express (a record, a tuple, an
 * unconstrained value, a recursive definition) is rejected when the tool is
 * defined, with a `ToolSchemaError` that names the path, unless the caller
 * opts out with `{ strict: false }`.
 *
 * @since 0.1.0
 */
import { Cause, Exit, JsonSchema, Option, Predicate, Schema } from "effect"
import type { StandardJSONSchemaV1, StandardSchemaV1 } from "effect/StandardSchema"
import { maxArgumentDepth, nestsDeeperThan } from "./internal/arguments.ts"

const TypeId = "~@tanstack/ai-effect/ToolSchema"

/**
 * A tool schema made from an Effect Schema: a Standard Schema that decodes
 * model arguments into the schema's `Type`, and a Standard JSON Schema that
 * describes them to the model.
 *
 * Both sides of the Standard types are the decoded `Type`, because core types
 * the tool function's argument from the schema's input side and passes it the
 * validated value.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Schema } from "effect"
 *
 * const input: AI.ToolSchema<Schema.Struct<{ id: typeof Schema.String }>> =
 *   AI.toolSchema(Schema.Struct({ id: Schema.String }))
 * input.jsonSchema // { type: "object", properties: { id: { type: "string" } }, ... }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolSchema<S extends Schema.Constraint> {
  readonly [TypeId]: typeof TypeId
  /** The Effect Schema this tool schema was made from. */
  readonly schema: S
  /** The schema's canonical JSON codec: it decodes arguments and encodes results. */
  readonly codec: Schema.toCodecJson<S>
  /** The JSON Schema sent to the provider. */
  readonly jsonSchema: JsonSchema.JsonSchema
  /** Whether `jsonSchema` stays inside OpenAI's strict-mode subset. */
  readonly strict: boolean
  /**
   * The keys the model must send. Being a readonly array, it also keeps core
   * from reading a `ToolSchema` as a plain JSON Schema object, which would
   * type the tool's input as `unknown`.
   */
  readonly required: ReadonlyArray<string>
  readonly "~standard":
    & StandardSchemaV1.Props<S["Type"], S["Type"]>
    & StandardJSONSchemaV1.Props<S["Type"], S["Type"]>
}

/**
 * A schema that cannot be used as a strict tool schema. Raised when the tool
 * is defined, never while a model waits for a result.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Schema } from "effect"
 *
 * try {
 *   AI.toolSchema(Schema.Struct({ tags: Schema.Record(Schema.String, Schema.String) }))
 * } catch (error) {
 *   if (error instanceof AI.ToolSchemaError) console.log(error.path, error.reason)
 * }
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolSchemaError extends Schema.TaggedError<ToolSchemaError>()("ToolSchemaError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Tool schema at ${this.path} cannot be used in strict mode: ${this.reason}. ` +
      `Change the schema, or pass { strict: false } to AI.toolSchema to send it without strict mode.`
  }
}

/**
 * Options of {@link toolSchema}.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolSchemaOptions {
  /**
   * `true` (the default) rejects schemas outside OpenAI's strict subset with a
   * `ToolSchemaError`. `false` sends such schemas as they are; the OpenAI
   * adapter then sends the tool with `strict: false`.
   */
  readonly strict?: boolean | undefined
}

/**
 * Makes a TanStack AI tool schema from an Effect Schema.
 *
 * @example
 * ```ts
 * import { toolDefinition } from "@tanstack/ai"
 * import * as AI from "@tanstack/ai-effect"
 * import { Schema } from "effect"
 *
 * const getOrderDef = toolDefinition({
 *   name: "get_order",
 *   description: "Get the status of an order",
 *   inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
 *   outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const toolSchema = <S extends Schema.Codec<any, any, never, any>>(
  schema: S,
  options?: ToolSchemaOptions
): ToolSchema<S> => {
  const strict = options?.strict ?? true
  const jsonSchema = toModelJsonSchema(schema, strict)
  const codec = Schema.toCodecJson(schema)
  const decode = Schema.decodeUnknownExit(codec, { errors: "all" })
  const validate = (value: unknown): StandardSchemaV1.Result<S["Type"]> => {
    if (nestsDeeperThan(value, maxArgumentDepth)) {
      return { issues: [{ message: `The arguments are nested deeper than ${maxArgumentDepth} levels` }] }
    }
    const exit = decode(dropAbsentNulls(value, jsonSchema))
    return Exit.isSuccess(exit) ? { value: exit.value } : { issues: issuesOf(exit.cause) }
  }
  return {
    [TypeId]: TypeId,
    schema,
    codec,
    jsonSchema,
    strict,
    required: Array.isArray(jsonSchema.required) ? jsonSchema.required : [],
    "~standard": {
      version: 1,
      vendor: "effect",
      validate,
      // One document for every target: a strict schema reads the same in
      // draft-07 and 2020-12, and a tuple (never strict) is written as
      // 2020-12's prefixItems, the dialect OpenAI reads.
      jsonSchema: { input: () => jsonSchema, output: () => jsonSchema }
    }
  }
}

/**
 * Whether a value is a {@link ToolSchema}.
 *
 * @example
 * ```ts
 * import * as AI from "@tanstack/ai-effect"
 * import { Schema } from "effect"
 *
 * AI.isToolSchema(AI.toolSchema(Schema.Struct({}))) // true
 * ```
 *
 * @since 0.1.0
 * @category guards
 */
export const isToolSchema = (u: unknown): u is ToolSchema<Schema.Codec<unknown, unknown>> => Predicate.hasProperty(u, TypeId)

const issuesOf = (cause: Cause.Cause<Schema.SchemaError>): ReadonlyArray<StandardSchemaV1.Issue> =>
  Option.match(Cause.findErrorOption(cause), {
    onNone: () => [{ message: Cause.pretty(cause) }],
    // One issue carrying Effect's own message: core joins issue messages and
    // drops their paths, so the path has to be inside the message.
    onSome: (error) => [{ message: error.message }]
  })

// ---------------------------------------------------------------------------
// JSON Schema for the model
// ---------------------------------------------------------------------------

type Node = Record<string, unknown>

const nonFiniteStrings = ["Infinity", "-Infinity", "NaN"]

const toModelJsonSchema = (schema: Schema.Constraint, strict: boolean): JsonSchema.JsonSchema => {
  const document = JsonSchema.toDocumentDraft07(
    Schema.toJsonSchemaDocument(schema, { onExcessProperty: "error" })
  )
  const out = rewrite(document.schema, "$", document.definitions, new Set())
  if (strict) assertStrict(out, "$")
  return out
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
      throw new ToolSchemaError({ path, reason: `the reference ${ref} is not defined` })
    }
    if (visiting.has(name)) {
      throw new ToolSchemaError({ path, reason: `the definition ${name} is recursive and cannot be inlined` })
    }
    const { $ref: _ref, ...siblings } = node
    return { ...rewrite(target, path, definitions, new Set([...visiting, name])), ...siblings }
  }
  const out: Node = {}
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

/** Throws a `ToolSchemaError` at the first node outside OpenAI's strict subset. */
const assertStrict = (node: Node, path: string): void => {
  if (!typeKeywords.some((key) => key in node)) {
    throw new ToolSchemaError({ path, reason: "a value of any type (such as Schema.Unknown) has no JSON type" })
  }
  for (const key of unsupportedKeywords) {
    if (key in node) throw new ToolSchemaError({ path, reason: `the keyword "${key}" is not supported` })
  }
  if ("prefixItems" in node) {
    throw new ToolSchemaError({ path, reason: "tuples are not supported; use a struct with named fields" })
  }
  const isObject = node.type === "object" || (Array.isArray(node.type) && node.type.includes("object"))
  if (isObject && (node.additionalProperties !== false || !isNode(node.properties))) {
    throw new ToolSchemaError({ path, reason: "records and open objects are not supported; use a struct" })
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
const dropAbsentNulls = (value: unknown, node: unknown): unknown => {
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
