/**
 * Test support for `@tanstack/ai-effect`: scripted adapters, and fake
 * OpenAI, Anthropic and Gemini servers that the real provider adapters talk
 * to over HTTP.
 *
 * @since 0.1.0
 */
export * from "./FakeProvider.ts"
export * from "./FakeOpenAI.ts"
export * from "./FakeAnthropic.ts"
export * from "./FakeGemini.ts"
export * from "./ScriptedText.ts"
export * from "./ScriptedActivities.ts"
export * from "./StreamDurabilityConformance.ts"
