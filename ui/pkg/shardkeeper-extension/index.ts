import { IPlugin, TableColumnLocation } from '@shell/core/types';
import { SHARDS_ROUTE, SHARDED_FLEET_TYPES, FLEET_PRODUCT, APP_BUNDLES_PATH } from './config';
import { shardColumn, shardPaginationColumn } from './utils/column';

// The extension's entry point, called by Rancher's extension loader.
export default function(plugin: IPlugin): void {
  plugin.metadata = require('./package.json');

  // Shell loads a product module and calls its init, as Rancher's own
  // extensions register theirs.
  plugin.addProduct(require('./product'));

  plugin.addRoute('default', {
    name:      SHARDS_ROUTE,
    path:      '/c/:cluster/fleet/shardkeeper',
    component: () => import('./pages/Shards.vue'),
    meta:      { product: FLEET_PRODUCT },
  });

  // The GitRepo and HelmOp lists are routes of their resource; App Bundles,
  // where Rancher 2.12 and later list both, is a page of its own.
  plugin.addTableColumn(TableColumnLocation.RESOURCE, { resource: SHARDED_FLEET_TYPES }, shardColumn, shardPaginationColumn);
  plugin.addTableColumn(TableColumnLocation.RESOURCE, { path: [{ urlPath: APP_BUNDLES_PATH, endsWith: true }] }, shardColumn, shardPaginationColumn);
}
