import { benchChat } from './bench/chat.ts'
const rows = await benchChat({ quick: true })
for (const r of rows) console.log(r.ratio.toFixed(2), `(${r.ratioMin.toFixed(2)}-${r.ratioMax.toFixed(2)})`, r.rawMicros.toFixed(0), r.oursMicros.toFixed(0), r.case)
