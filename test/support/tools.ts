/**
 * The tool definitions the tests share: the seed's order lookup, a
 * notification whose effect a test counts, and a refund that needs approval.
 */
import { toolDefinition } from "@tanstack/ai"
import * as AI from "@tanstack/ai-effect"
import { Schema } from "effect"

export const getOrderDef = toolDefinition({
  name: "get_order",
  description: "Get the status of an order",
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ status: Schema.String }))
})

export const notifyDef = toolDefinition({
  name: "notify",
  description: "Tell the customer",
  inputSchema: AI.toolSchema(Schema.Struct({ to: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ sent: Schema.Number }))
})

export const refundDef = toolDefinition({
  name: "refund",
  description: "Refund an order",
  needsApproval: true,
  inputSchema: AI.toolSchema(Schema.Struct({ id: Schema.String })),
  outputSchema: AI.toolSchema(Schema.Struct({ refunded: Schema.Boolean }))
})
