// Adds the Shards entry to Fleet's product (Continuous Delivery) rather
// than a product of its own: the shards are Fleet's controllers, and the
// operator looks for them beside GitRepos.
import { IPlugin } from '@shell/core/types';
import {
  BLANK_CLUSTER, FLEET_PRODUCT, SHARDS_ROUTE, SHARDS_VIRTUAL_TYPE
} from './config';

/** weightType is in Shell's DSL, but not in its types. */
interface Weighted {
  weightType(type: string, weight: number, forBasic: boolean): void;
}

export function init(plugin: IPlugin, store: any): void {
  const dsl = plugin.DSL(store, FLEET_PRODUCT);

  dsl.virtualType({
    label:      'Shards',
    namespaced: false,
    name:       SHARDS_VIRTUAL_TYPE,
    route:      { name: SHARDS_ROUTE, params: { cluster: BLANK_CLUSTER, product: FLEET_PRODUCT } },
  });
  dsl.basicType([SHARDS_VIRTUAL_TYPE]);
  // Below Fleet's own entries (112 to 107), above its resources group.
  (dsl as unknown as Weighted).weightType(SHARDS_VIRTUAL_TYPE, 106, true);
}
