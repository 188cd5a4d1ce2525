/**
 * The detail pane's text (raw event, snapshot, diff against the previous stage): shared with
 * the web UI (@portico/trace-view).
 */
export { detailLines, bodyLines, snapshotFor, previousSnapshot, stateText, unifiedDiff, type DetailMode, type DetailLine, type LineColor } from '@portico/trace-view'
