// The Shard column of the GitRepo and HelmOp lists: the shard label that
// Fleet reads (an object without it is on the unsharded controllers).
import { TableColumn, PaginationTableColumn } from '@shell/core/types';
import { FLEET_SHARD_LABEL } from './api';

export const UNSHARDED = '(unsharded)';

export function shardOf(row: { metadata?: { labels?: Record<string, string> | null } } | null | undefined): string {
  return row?.metadata?.labels?.[FLEET_SHARD_LABEL] || UNSHARDED;
}

/** The column as Rancher's list takes it, when lists are paginated in the browser. */
export const shardColumn: TableColumn = {
  name:     'shardkeeper-shard',
  label:    'Shard',
  getValue: shardOf,
  sort:     [`metadata.labels[${ FLEET_SHARD_LABEL }]`],
  search:   `metadata.labels[${ FLEET_SHARD_LABEL }]`,
  width:    120,
};

/** The column when the server paginates: a path on the object, not a function. */
export const shardPaginationColumn: PaginationTableColumn = {
  name:   'shardkeeper-shard',
  label:  'Shard',
  value:  `metadata.labels[${ FLEET_SHARD_LABEL }]`,
  sort:   [`metadata.labels[${ FLEET_SHARD_LABEL }]`],
  search: `metadata.labels[${ FLEET_SHARD_LABEL }]`,
  width:  120,
};
