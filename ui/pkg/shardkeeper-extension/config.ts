// Names shared by the entry point, the product hook and the page.

/** Fleet's product in Rancher: Continuous Delivery. */
export const FLEET_PRODUCT = 'fleet';

/** The side-menu entry of the Shards page. */
export const SHARDS_VIRTUAL_TYPE = 'shardkeeper-shards';

/** The Shards page's route, nested under Fleet's URLs like Fleet's own pages. */
export const SHARDS_ROUTE = 'c-cluster-fleet-shardkeeper';

/** The Fleet kinds whose lists get the Shard column. */
export const SHARDED_FLEET_TYPES = ['fleet.cattle.io.gitrepo', 'fleet.cattle.io.helmop'];

/** Fleet's pages live on the local cluster's management store, under the blank cluster ID. */
export const BLANK_CLUSTER = '_';

/** The end of the App Bundles page's path, which lists GitRepos and HelmOps together. */
export const APP_BUNDLES_PATH = '/fleet/application';
