/**
 * The throwaway database servers of one test file.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import { missing, startPostgres, startRedis, type TestServer } from "./services.ts"

/**
 * PostgreSQL and Redis for one test file, as far as this machine has them
 * (under CI=true, `missing` fails instead): started before the file's tests,
 * stopped after them.
 */
export const useServers = () => {
  let postgres: TestServer | undefined
  let redis: TestServer | undefined
  beforeAll(async () => {
    if (missing("postgres") === undefined) postgres = await startPostgres()
    if (missing("redis") === undefined) redis = await startRedis()
  }, 60_000)
  afterAll(async () => {
    await postgres?.dispose()
    await redis?.dispose()
  })
  return {
    postgres: missing("postgres") === undefined ? () => postgres!.url : undefined,
    redis: missing("redis") === undefined ? () => redis!.url : undefined
  }
}
