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
 * model. The checks strict mode understands go on the wire as the schema
 * states them: string length and pattern, numeric bounds, array length.
 * A schema that strict mode cannot express (a record, a tuple, an
 * unconstrained value, a recursive definition) is rejected when the tool is
 * defined, with a `ToolSchemaError` that names the path, unless the caller
 * opts out with `{ strict: false }`. Decoding enforces every check either way.
 *
 * @since 0.1.0
 */
import { Cause, Exit, type JsonSchema, Option, Predicate, Result, Schema } from "effect"
import type { StandardJSONSchemaV1, StandardSchemaV1 } from "effect/StandardSchema"
import { maxArgumentDepth, nestsDeeperThan } from "./internal/arguments.ts"
import { dropAbsentNulls, toModelJsonSchema } from "./internal/jsonSchema.ts"

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
  reason: Schema.String,
  /** What to change so that the schema can be used. */
  remedy: Schema.String
}) {
  override get message(): string {
    return `Tool schema at ${this.path} cannot be used: ${this.reason}. ${this.remedy}`
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
  const jsonSchema = Result.getOrThrowWith(toModelJsonSchema(schema, strict), (problem) => new ToolSchemaError(problem))
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

/**
 * Throws a `ToolSchemaError` unless the schema describes a JSON object: every
 * provider takes a tool's parameters as one, and OpenAI's strict structured
 * output wants one at its root.
 *
 * @internal
 */
export const assertObjectRoot = (schema: ToolSchema<Schema.Constraint>, use: string): void => {
  const root = schema.jsonSchema
  if (root.type === "object") return
  const described = Predicate.isString(root.type)
    ? `a ${root.type}`
    : Array.isArray(root.anyOf) ? "a union" : "a value that is not an object"
  throw new ToolSchemaError({
    path: "$",
    reason: `${use} must be a JSON object, and this schema describes ${described}`,
    remedy:
      "Every provider takes an object here (OpenAI's function parameters, Anthropic's input_schema, Gemini's parametersJsonSchema): wrap the value in a struct, such as Schema.Struct({ value: ... })."
  })
}

const issuesOf = (cause: Cause.Cause<Schema.SchemaError>): ReadonlyArray<StandardSchemaV1.Issue> =>
  Option.match(Cause.findErrorOption(cause), {
    onNone: () => [{ message: Cause.pretty(cause) }],
    // One issue carrying Effect's own message: core joins issue messages and
    // drops their paths, so the path has to be inside the message.
    onSome: (error) => [{ message: error.message }]
  })
