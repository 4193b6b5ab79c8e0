/**
 * CPU time of processes, read from Linux's /proc: a process's own, and a
 * server's with its children (PostgreSQL's backends), in microseconds.
 */
import { readdirSync, readFileSync } from 'node:fs'

/** Linux counts CPU time in clock ticks of 10 ms. */
const microsPerTick = 10_000

const statOf = (pid: number): ReadonlyArray<string> | undefined => {
  try {
    // The fields after the command name, which may hold spaces: state is [0], ppid [1], utime [11], stime [12].
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  } catch {
    return undefined
  }
}

/** User and system time of a process's stat fields; with `children`, also those of its children that ended. */
const ticksOf = (fields: ReadonlyArray<string>, children = false): number =>
  Number(fields[11]) + Number(fields[12]) + (children ? Number(fields[13]) + Number(fields[14]) : 0)

/** The process's user and system time so far. */
export const cpuMicros = (pid: number): number => {
  const fields = statOf(pid)
  return fields === undefined ? 0 : ticksOf(fields) * microsPerTick
}

/**
 * A server's user and system time so far: its own, its children's that
 * still run, and those of its children that ended (cutime and cstime).
 */
export const treeCpuMicros = (rootPid: number): number => {
  const root = statOf(rootPid)
  if (root === undefined) return 0
  let ticks = ticksOf(root, true)
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === rootPid) continue
    const fields = statOf(pid)
    if (fields !== undefined && Number(fields[1]) === rootPid) ticks += ticksOf(fields)
  }
  return ticks * microsPerTick
}
