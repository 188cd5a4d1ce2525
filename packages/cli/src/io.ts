/** The streams a command writes to (the process's, or a test's). */
export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean }
  stderr: NodeJS.WritableStream & { isTTY?: boolean }
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
}

export const processIo: Io = { stdout: process.stdout, stderr: process.stderr, stdin: process.stdin }
