/**
 * Helpers shared by the scripted adapter and the fake OpenAI server.
 */
/** The text deltas of a reply (`ScriptedReply`), in order. */
export const textDeltas = (reply: { readonly text?: string | ReadonlyArray<string> | undefined }): ReadonlyArray<string> =>
  reply.text === undefined ? [] : typeof reply.text === "string" ? [reply.text] : reply.text

/** The arguments' text a model sends for a call (`ScriptedToolCall`): the raw text when the script gives one. */
export const argumentsText = (call: { readonly rawArgs?: string | undefined; readonly args?: unknown }): string => call.rawArgs ?? JSON.stringify(call.args ?? {})
