/**
 * Helpers shared by the scripted adapter and the fake OpenAI server.
 */
import type { ScriptedReply, ScriptedToolCall } from "./ScriptedText.ts"

/** The text deltas of a reply, in order. */
export const textDeltas = (reply: ScriptedReply): ReadonlyArray<string> =>
  reply.text === undefined ? [] : typeof reply.text === "string" ? [reply.text] : reply.text

/** The arguments' text a model sends for a call: the raw text when the script gives one. */
export const argumentsText = (call: ScriptedToolCall): string => call.rawArgs ?? JSON.stringify(call.args ?? {})
