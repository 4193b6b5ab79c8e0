import { toolDefinition } from "@tanstack/ai"
import type { InferToolInput } from "@tanstack/ai"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import * as AI from "@tanstack/ai-effect"
import { fakeOpenAI } from "@tanstack/ai-effect/testing"
import { createOpenaiChat } from "@tanstack/ai-openai"
import { Effect, Schema, Stream } from "effect"

const validate = (schema: AI.ToolSchema<Schema.Constraint>, value: unknown) => {
  const result = schema["~standard"].validate(value)
  if (result instanceof Promise) throw new Error("validation must be synchronous")
  return result
}

const objectsIn = (node: unknown): Array<Record<string, unknown>> => {
  if (Array.isArray(node)) return node.flatMap(objectsIn)
  if (node === null || typeof node !== "object") return []
  const record = node as Record<string, unknown>
  const self = record.type === "object" ? [record] : []
  return [...self, ...Object.values(record).flatMap(objectsIn)]
}

describe("AI.toolSchema", () => {
  it("decodes the model's arguments into the schema's Type", () => {
    const schema = AI.toolSchema(Schema.Struct({ id: Schema.String, at: Schema.Date }))
    const result = validate(schema, { id: "A-100", at: "2026-01-02T03:04:05.000Z" })
    expect(result.issues).toBeUndefined()
    expect(result).toEqual({ value: { id: "A-100", at: new Date("2026-01-02T03:04:05.000Z") } })
  })

  it("closes every object, so that OpenAI strict mode accepts the schema", () => {
    const schema = AI.toolSchema(Schema.Struct({
      customer: Schema.Struct({ name: Schema.String, address: Schema.Struct({ city: Schema.String }) }),
      lines: Schema.Array(Schema.Struct({ sku: Schema.String, quantity: Schema.Int }))
    }))
    const objects = objectsIn(schema.jsonSchema)
    expect(objects).toHaveLength(4)
    for (const object of objects) expect(object.additionalProperties).toBe(false)
    expect(schema.strict).toBe(true)
  })

  it("inlines named definitions instead of referencing them", () => {
    const Address = Schema.Struct({ city: Schema.String }).annotate({ identifier: "Address" })
    class Customer extends Schema.Class<Customer>("Customer")({ name: Schema.String }) {}
    const schema = AI.toolSchema(Schema.Struct({ from: Address, to: Address, customer: Customer }))
    const text = JSON.stringify(schema.jsonSchema)
    expect(text).not.toContain("$ref")
    expect(text).not.toContain("definitions")
    expect(schema.jsonSchema).toMatchObject({
      properties: { from: { properties: { city: { type: "string" } } }, customer: { properties: { name: { type: "string" } } } }
    })
  })

  it("decodes a null the model sends for an absent optional field as absent", () => {
    const schema = AI.toolSchema(Schema.Struct({
      id: Schema.String,
      note: Schema.optional(Schema.String),
      limit: Schema.optionalKey(Schema.Int),
      filter: Schema.optionalKey(Schema.Struct({ status: Schema.optionalKey(Schema.String) }))
    }))
    expect(validate(schema, { id: "A-1", note: null, limit: null, filter: { status: null } })).toEqual({
      value: { id: "A-1", note: undefined, filter: {} }
    })
    expect(validate(schema, { id: "A-1" })).toEqual({ value: { id: "A-1" } })
  })

  it("keeps a null that the schema itself accepts", () => {
    const schema = AI.toolSchema(Schema.Struct({ parent: Schema.optionalKey(Schema.NullOr(Schema.String)) }))
    expect(validate(schema, { parent: null })).toEqual({ value: { parent: null } })
  })

  it("reports a decoding failure with Effect's path and expectation", () => {
    const schema = AI.toolSchema(Schema.Struct({ order: Schema.Struct({ id: Schema.String }) }))
    const result = validate(schema, { order: { id: 42 } })
    expect(result.issues).toHaveLength(1)
    expect(result.issues?.[0]?.message).toContain("Expected string")
    expect(result.issues?.[0]?.message).toContain(`["order"]["id"]`)
  })

  it("offers Schema.Number to the model as a JSON number, without Effect's non-finite strings", () => {
    const schema = AI.toolSchema(Schema.Struct({ amount: Schema.Number }))
    expect(schema.jsonSchema).toMatchObject({ properties: { amount: { type: "number" } } })
    expect(JSON.stringify(schema.jsonSchema)).not.toContain("NaN")
  })

  it("turns oneOf unions into anyOf, which strict mode accepts", () => {
    const schema = AI.toolSchema(Schema.Struct({
      target: Schema.Union([
        Schema.Struct({ kind: Schema.Literal("issue"), number: Schema.Int }),
        Schema.Struct({ kind: Schema.Literal("pull"), number: Schema.Int })
      ])
    }))
    const text = JSON.stringify(schema.jsonSchema)
    expect(text).not.toContain("oneOf")
    expect(schema.jsonSchema).toMatchObject({ properties: { target: { anyOf: [{ type: "object" }, { type: "object" }] } } })
    expect(validate(schema, { target: { kind: "pull", number: 7 } })).toEqual({ value: { target: { kind: "pull", number: 7 } } })
  })

  it.each([
    ["a record", Schema.Struct({ tags: Schema.Record(Schema.String, Schema.String) }), "$.tags"],
    ["a tuple", Schema.Struct({ pair: Schema.Tuple([Schema.String, Schema.Int]) }), "$.pair"],
    ["an unknown value", Schema.Struct({ payload: Schema.Unknown }), "$.payload"]
  ])("rejects %s when the tool is defined, naming the path", (_, schema, path) => {
    expect(() => AI.toolSchema(schema)).toThrow(AI.ToolSchemaError)
    try {
      AI.toolSchema(schema)
    } catch (error) {
      expect((error as AI.ToolSchemaError).path).toBe(path)
      expect((error as AI.ToolSchemaError).message).toContain("strict: false")
    }
  })

  it("rejects a recursive schema, which cannot be inlined", () => {
    interface Category {
      readonly name: string
      readonly children: ReadonlyArray<Category>
    }
    const Category = Schema.Struct({
      name: Schema.String,
      children: Schema.Array(Schema.suspend((): Schema.Codec<Category> => Category))
    }).annotate({ identifier: "Category" })
    expect(() => AI.toolSchema(Schema.Struct({ root: Category }))).toThrow(/recursive/)
  })

  it("states string length, pattern, numeric bounds and array length to the model as the schema writes them", () => {
    const schema = AI.toolSchema(Schema.Struct({
      code: Schema.String.check(Schema.isMinLength(3), Schema.isMaxLength(8), Schema.isPattern(/^[A-Z0-9]+$/)),
      rating: Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 5 })),
      quantity: Schema.Int.check(Schema.isGreaterThan(0)),
      tags: Schema.Array(Schema.String).check(Schema.isMinLength(1), Schema.isMaxLength(3))
    }))
    expect(schema.jsonSchema.properties).toEqual({
      code: { type: "string", minLength: 3, maxLength: 8, pattern: "^[A-Z0-9]+$" },
      rating: { type: "number", minimum: 1, maximum: 5 },
      quantity: { type: "integer", exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 3 }
    })
  })

  it("still enforces every check when it decodes, those the model was not told included", () => {
    const schema = AI.toolSchema(Schema.Struct({
      code: Schema.String.check(Schema.isPattern(/^[a-z]+$/i), Schema.isMinLength(3)),
      word: Schema.String.check(Schema.isPattern(/^[a-z]+$/), Schema.isPattern(/e/))
    }))
    // The `i` flag has no JSON Schema form; of two patterns, strict mode takes one node.
    expect(schema.jsonSchema.properties).toEqual({
      code: { type: "string", minLength: 3 },
      word: { type: "string", pattern: "^[a-z]+$" }
    })
    expect(validate(schema, { code: "AbC", word: "tree" })).toEqual({ value: { code: "AbC", word: "tree" } })
    expect(validate(schema, { code: "ab", word: "tree" }).issues?.[0]?.message).toContain("at least 3")
    expect(validate(schema, { code: "a-c", word: "tree" }).issues?.[0]?.message).toContain("RegExp")
    expect(validate(schema, { code: "abc", word: "word" }).issues?.[0]?.message).toContain("RegExp e")
  })

  it.each([
    ["a string", Schema.String, "a string"],
    ["a union", Schema.Union([Schema.Struct({ a: Schema.String }), Schema.Struct({ b: Schema.String })]), "a union"],
    ["an array", Schema.Array(Schema.String), "a array"]
  ])("refuses %s as a tool's parameters when the tool is made, saying they must be an object", (_, schema, described) => {
    const definition = toolDefinition({ name: "lookup", description: "Looks up", inputSchema: AI.toolSchema(schema) })
    const make = () => AI.serverTool(definition, () => Effect.succeed("found"))
    expect(make).toThrow(AI.ToolSchemaError)
    expect(make).toThrow(`The parameters of the tool lookup must be a JSON object, and this schema describes ${described}`)
    expect(make).toThrow("Schema.Struct({ value: ... })")
  })

  it("keeps a non-object schema for what is not sent as parameters, such as a tool's output", () => {
    const tool = AI.serverTool(
      toolDefinition({
        name: "greet",
        description: "Greets",
        inputSchema: AI.toolSchema(Schema.Struct({ name: Schema.String })),
        outputSchema: AI.toolSchema(Schema.String)
      }),
      ({ name }) => Effect.succeed(`Hello, ${name}`)
    )
    expect(tool.name).toBe("greet")
  })

  it("sends a schema outside strict mode as it is when strict: false is asked for", () => {
    const schema = AI.toolSchema(Schema.Struct({ tags: Schema.Record(Schema.String, Schema.String) }), { strict: false })
    expect(schema.strict).toBe(false)
    expect(schema.jsonSchema).toMatchObject({ properties: { tags: { type: "object" } } })
    expect(validate(schema, { tags: { a: "b" } })).toEqual({ value: { tags: { a: "b" } } })
  })

  it("gives core a validator and a JSON Schema, the two parts chat() requires", () => {
    const schema = AI.toolSchema(Schema.Struct({ id: Schema.String }))
    expect(typeof schema["~standard"].validate).toBe("function")
    expect(schema["~standard"].jsonSchema.input({ target: "draft-07" })).toEqual(schema.jsonSchema)
  })

  it("types the tool function's input as the schema's decoded Type", () => {
    const definition = toolDefinition({
      name: "schedule",
      description: "Schedule a delivery",
      inputSchema: AI.toolSchema(Schema.Struct({ at: Schema.Date, note: Schema.optionalKey(Schema.String) }))
    })
    expectTypeOf<InferToolInput<typeof definition>>().toEqualTypeOf<{ readonly at: Date; readonly note?: string }>()
  })
})

describe("AI.toolSchema through the real OpenAI adapter", () => {
  const roundTrip = <S extends Schema.Codec<any, any, never, any>>(schema: S, args: unknown) =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ toolCalls: [{ name: "store", args }] }, { text: "Stored." }])
      const received: Array<S["Type"]> = []
      const store = AI.serverTool(
        toolDefinition({ name: "store", description: "Stores the value", inputSchema: AI.toolSchema(schema, { strict: false }) }),
        (input) => Effect.sync(() => received.push(input)).pipe(Effect.as({ ok: true }))
      )
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      yield* AI.chat({ adapter, messages: [{ role: "user", content: "Store it" }], tools: [store] }).pipe(Stream.runDrain)
      return { received, sent: server.requests[0]?.tools?.[0] }
    }).pipe(Effect.scoped)

  it.live("strict mode carries the schema's constraints on the wire, and a conforming call decodes", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ toolCalls: [{ name: "rate", args: { code: "AB12", stars: 4, tags: ["fast"] } }] }, { text: "Rated." }])
      const received: Array<unknown> = []
      const rate = AI.serverTool(
        toolDefinition({
          name: "rate",
          description: "Rates an order",
          inputSchema: AI.toolSchema(Schema.Struct({
            code: Schema.String.check(Schema.isMinLength(3), Schema.isPattern(/^[A-Z0-9]+$/)),
            stars: Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 5 })),
            tags: Schema.Array(Schema.String).check(Schema.isMaxLength(3))
          }))
        }),
        (input) => Effect.sync(() => received.push(input)).pipe(Effect.as({ ok: true }))
      )
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      yield* AI.chat({ adapter, messages: [{ role: "user", content: "Rate it" }], tools: [rate] }).pipe(Stream.runDrain)
      expect(server.requests[0]?.tools?.[0]).toMatchObject({
        strict: true,
        parameters: {
          properties: {
            code: { type: "string", minLength: 3, pattern: "^[A-Z0-9]+$" },
            stars: { type: "number", minimum: 1, maximum: 5 },
            tags: { type: "array", maxItems: 3 }
          }
        }
      })
      expect(received).toEqual([{ code: "AB12", stars: 4, tags: ["fast"] }])
    }).pipe(Effect.scoped))

  it.live("AI.generateObject sends the constraints with its strict schema, and refuses a root that is not an object", () =>
    Effect.gen(function*() {
      const server = yield* fakeOpenAI([{ text: JSON.stringify({ title: "Checkout down", votes: 3 }) }])
      const adapter = createOpenaiChat("gpt-5.2", "test-key", { baseURL: server.baseURL })
      const Ticket = Schema.Struct({ title: Schema.String.check(Schema.isMinLength(3)), votes: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)) })
      const ticket = yield* AI.generateObject({ adapter, messages: [{ role: "user", content: "File it" }], schema: Ticket })
      expect(ticket).toEqual({ title: "Checkout down", votes: 3 })
      expect(JSON.stringify(server.requests[0])).toContain(`"title":{"type":"string","minLength":3}`)
      expect(() => AI.generateObject({ adapter, schema: Schema.String })).toThrow(
        "The schema of a strict structured output must be a JSON object, and this schema describes a string"
      )
    }).pipe(Effect.scoped))

  it.live("a record round-trips: sent without strict mode, and decoded into the schema's Type", () =>
    Effect.gen(function*() {
      const { received, sent } = yield* roundTrip(Schema.Struct({ tags: Schema.Record(Schema.String, Schema.Int) }), { tags: { a: 1, b: 2 } })
      expect(sent).toMatchObject({ strict: false, parameters: { properties: { tags: { type: "object" } } } })
      expect(received).toEqual([{ tags: { a: 1, b: 2 } }])
    }))

  it.live("a tuple round-trips: sent without strict mode, and decoded into the schema's Type", () =>
    Effect.gen(function*() {
      const { received, sent } = yield* roundTrip(
        Schema.Struct({ at: Schema.Tuple([Schema.String, Schema.Date]) }),
        { at: ["meeting", "2026-12-03T10:00:00.000Z"] }
      )
      expect(sent).toMatchObject({ strict: false, parameters: { properties: { at: { type: "array" } } } })
      expect(received).toEqual([{ at: ["meeting", new Date("2026-12-03T10:00:00.000Z")] }])
    }))
})
