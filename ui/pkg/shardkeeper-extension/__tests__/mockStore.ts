// A stand-in for Rancher's store: it answers management/request as Steve
// would, from a shard ConfigMap it keeps, and from what the e2e run wrote:
// the status, the GitRepos and HelmOps, the admission policy's answers.
// Each PUT is recorded, and stored only when the test's admission says so.
import statusFixture from '../fixtures/status.json';
import admission from '../fixtures/admission.json';
import objectsFixture from '../fixtures/objects.json';

export const NS = statusFixture.metadata.namespace;

export type Admission = 'allow' | 'refuse' | 'warn';

export interface Call {
  url: string;
  method: string;
  data?: any;
}

export class MockStore {
  calls: Call[] = [];
  admission: Admission = 'allow';
  shardConfigMap: any;
  statusConfigMap: any = statusFixture;
  objects: Record<string, any[]> = JSON.parse(JSON.stringify(objectsFixture));
  events: any[] = [];

  constructor(shards: string) {
    this.shardConfigMap = {
      apiVersion: 'v1',
      kind:       'ConfigMap',
      metadata:   {
        name: 'shardkeeper', namespace: NS, resourceVersion: '7', annotations: {}
      },
      data: { shards },
    };
  }

  get puts(): Call[] {
    return this.calls.filter((c) => c.method === 'put');
  }

  dispatch(action: string, opt: Call): Promise<any> {
    if (action !== 'management/request') {
      return Promise.reject(new Error(`unexpected action ${ action }`));
    }
    this.calls.push(opt);
    const notFound = { _status: 404, message: 'not found' };

    if (opt.method === 'put') {
      if (this.admission === 'refuse') {
        return Promise.reject({
          type: 'error', status: 422, code: 'Invalid', message: admission.refusal, _status: 422
        });
      }
      this.shardConfigMap = { ...opt.data, metadata: { ...opt.data.metadata, resourceVersion: '8' } };
      const res = JSON.parse(JSON.stringify(this.shardConfigMap));

      Object.defineProperty(res, '_headers', {
        value: this.admission === 'warn' ? { warning: `299 - "${ admission.warning.replace(/"/g, '\\"') }"` } : {}
      });

      return Promise.resolve(res);
    }
    const base = `/v1/configmaps/${ NS }/`;

    if (opt.url === `${ base }shardkeeper`) {
      return Promise.resolve(JSON.parse(JSON.stringify(this.shardConfigMap)));
    }
    if (opt.url === `${ base }shardkeeper-status`) {
      return this.statusConfigMap ? Promise.resolve(this.statusConfigMap) : Promise.reject(notFound);
    }
    if (opt.url === `/v1/events/${ NS }`) {
      return Promise.resolve({ data: this.events });
    }
    const list = /^\/v1\/fleet\.cattle\.io\.([a-z]+)\?labelSelector=([^&]*)/.exec(opt.url);

    if (list && this.objects[list[1]]) {
      const [k, v] = decodeURIComponent(list[2]).split('=');

      return Promise.resolve({ data: this.objects[list[1]].filter((o) => o.metadata.labels?.[k] === v) });
    }

    return Promise.reject(notFound);
  }
}
