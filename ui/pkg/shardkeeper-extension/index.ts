import { IPlugin, TableColumnLocation } from '@shell/core/types';
import { init as initProduct } from './product';
import { SHARDS_ROUTE, SHARDED_FLEET_TYPES, FLEET_PRODUCT } from './config';
import { shardColumn, shardPaginationColumn } from './utils/column';

// The extension's entry point, called by Rancher's extension loader.
export default function(plugin: IPlugin): void {
  plugin.metadata = require('./package.json');

  plugin.addProduct({ init: initProduct } as any);

  plugin.addRoute('default', {
    name:      SHARDS_ROUTE,
    path:      '/c/:cluster/fleet/shardkeeper',
    component: () => import('./pages/Shards.vue'),
    meta:      { product: FLEET_PRODUCT },
  } as any);

  plugin.addTableColumn(TableColumnLocation.RESOURCE, { resource: SHARDED_FLEET_TYPES }, shardColumn as any, shardPaginationColumn as any);
}
