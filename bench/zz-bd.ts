import { benchDurable } from './durable.ts'
const rows = await benchDurable({ quick: process.env.FULL ? false : true })
for (const r of rows) console.log(JSON.stringify(r))
process.exit(0)
