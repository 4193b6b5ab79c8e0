/**
 * Test support for `@tanstack/ai-effect`: a scripted text adapter, and a fake
 * OpenAI Responses API that the real OpenAI adapter talks to over HTTP.
 *
 * @since 0.1.0
 */
export * from "./FakeProvider.ts"
export * from "./FakeOpenAI.ts"
export * from "./FakeAnthropic.ts"
export * from "./FakeGemini.ts"
export * from "./ScriptedText.ts"
export * from "./ScriptedActivities.ts"
