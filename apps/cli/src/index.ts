export { EXIT_CODE_BY_ERROR, EXIT_FAILED, EXIT_OK, EXIT_USAGE, toCliFailure } from './exit-codes.js';
export type { CliFailure, ExitCode } from './exit-codes.js';
export { formatHumanError, formatJsonError, isInteractive, Output, Progress } from './output.js';
export type { CliStreams } from './output.js';
export { buildProgram, runCli } from './program.js';
export { BUNDLE_FORMAT, verifyFile } from './verify-file.js';
export type { EvidenceFileFormat, FileVerification } from './verify-file.js';
