/** `/memory`: process and V8 heap statistics, as JSON. */

import v8 from 'node:v8'

export function memoryStats (): Record<string, unknown> {
  return {
    process: process.memoryUsage(),
    resourceUsage: process.resourceUsage(),
    heap: v8.getHeapStatistics(),
    heapSpaces: v8.getHeapSpaceStatistics(),
    heapCode: v8.getHeapCodeStatistics(),
    constrainedMemory: process.constrainedMemory(),
    availableMemory: process.availableMemory()
  }
}
