import { mount, flushPromises, VueWrapper } from '@vue/test-utils';
import Shards from '../pages/Shards.vue';
import admission from '../fixtures/admission.json';
import { MockStore, NS } from './mockStore';

async function mountPage(store: MockStore): Promise<VueWrapper<any>> {
  const wrapper = mount(Shards, {
    props:  { namespace: NS },
    global: { mocks: { $store: store, $route: { query: {} } } },
  });

  await flushPromises();

  return wrapper;
}

function sentence(message: string): string {
  return message.slice(message.indexOf('denied request: ') + 'denied request: '.length);
}

describe('the Shards page', () => {
  it('shows each shard of the status with its state, readiness, counts and message', async() => {
    const w = await mountPage(new MockStore('shard0,gpu'));
    const shard1 = w.get('[data-testid="sk-row-shard1"]');

    expect(shard1.get('[data-testid="sk-state"]').text()).toBe('Blocked');
    expect(shard1.get('[data-testid="sk-state"]').classes()).toContain('bg-warning');
    expect(shard1.get('[data-testid="sk-ready"]').text()).toBe('4/4');
    expect(shard1.get('[data-testid="sk-mapped"]').text()).toBe('1 gitrepos, 1 helmops, 1 helmreleases');
    expect(shard1.text()).toContain('its Deployments are kept');
    // shard1 is no longer listed: it cannot be removed again.
    expect(shard1.find('[data-testid="sk-remove-shard1"]').exists()).toBe(false);
    expect(w.get('[data-testid="sk-row-gpu"]').get('[data-testid="sk-job-placement"]').text()).toContain('dedicated=gpu:NoSchedule');
    expect(w.get('[data-testid="sk-row-shard0"]').find('[data-testid="sk-remove-shard0"]').exists()).toBe(true);
    const warnings = w.findAll('[data-testid="sk-warning"]').map((b) => b.text());

    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toContain('shard9');
  });

  it('shows a listed shard that the status does not name yet', async() => {
    const w = await mountPage(new MockStore('shard0,gpu,shard7'));

    expect(w.get('[data-testid="sk-row-shard7"]').get('[data-testid="sk-state"]').text()).toBe('Not reported yet');
  });

  it('shows the daemon\'s rejection of the list', async() => {
    const store = new MockStore('shard0,gpu');

    store.statusConfigMap = {
      ...store.statusConfigMap,
      data: { ...store.statusConfigMap.data, error: 'shards[2]: shard "gpu" is listed twice (also shards[1])' }
    };
    const w = await mountPage(store);

    expect(w.get('[data-testid="sk-status-error"]').text()).toContain('rejected and nothing was changed: shards[2]');
  });

  it('lists the Events of the shard ConfigMap only', async() => {
    const store = new MockStore('shard0,gpu');

    store.events = [
      {
        type: 'event', _type: 'Warning', reason: 'ShardDeletionBlocked', message: 'kept', lastTimestamp: '2026-01-01T00:00:00Z', involvedObject: { kind: 'ConfigMap', name: 'shardkeeper', namespace: NS }
      },
      {
        type: 'event', _type: 'Normal', reason: 'Other', message: 'elsewhere', lastTimestamp: '2026-01-02T00:00:00Z', involvedObject: { kind: 'ConfigMap', name: 'other', namespace: NS }
      },
    ];
    const w = await mountPage(store);
    const events = w.get('[data-testid="sk-events"]').text();

    expect(events).toContain('ShardDeletionBlocked');
    expect(events).not.toContain('elsewhere');
    // Steve's type is the schema's; the Event's own is in _type.
    expect(events).toContain('Warning');
    expect(events).not.toContain('event');
  });

  it('follows the status while it is open, and stops when it is closed', async() => {
    jest.useFakeTimers();
    try {
      const store = new MockStore('shard0,gpu');
      const w = await mountPage(store);

      expect(w.get('[data-testid="sk-row-shard1"]').get('[data-testid="sk-state"]').text()).toBe('Blocked');
      store.statusConfigMap = JSON.parse(JSON.stringify(store.statusConfigMap).replace(/state: Blocked/g, 'state: Active'));
      jest.advanceTimersByTime(5000);
      await flushPromises();
      expect(w.get('[data-testid="sk-row-shard1"]').get('[data-testid="sk-state"]').text()).toBe('Active');

      const reads = store.calls.length;

      w.unmount();
      jest.advanceTimersByTime(15000);
      await flushPromises();
      expect(store.calls.length).toBe(reads);
    } finally {
      jest.useRealTimers();
    }
  });

  it('says when there is no shard ConfigMap to read', async() => {
    const store = new MockStore('x');

    store.shardConfigMap = null;
    const w = await mountPage(store);

    expect(w.find('[data-testid="sk-no-configmap"]').exists()).toBe(true);
    expect(w.get('[data-testid="sk-add"]').attributes('disabled')).toBeDefined();
  });
});

describe('adding a shard', () => {
  it('saves the list with the new ID, and the page shows it', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    await w.get('[data-testid="sk-add"]').trigger('click');
    await w.get('[data-testid="sk-add-id"]').setValue('shard2');
    await w.get('[data-testid="sk-add-save"]').trigger('click');
    await flushPromises();

    expect(store.puts).toHaveLength(1);
    expect(store.puts[0].url).toBe(`/v1/configmaps/${ NS }/shardkeeper`);
    expect(store.puts[0].data.data.shards).toBe('shard0,gpu,shard2');
    // The update carries the version it read, so a concurrent edit fails.
    expect(store.puts[0].data.metadata.resourceVersion).toBe('7');
    expect(w.find('[role="dialog"]').exists()).toBe(false);
    expect(w.get('[data-testid="sk-row-shard2"]').text()).toContain('Not reported yet');
  });

  it('shows the admission policy\'s refusal, and saves nothing', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    store.admission = 'refuse';
    await w.get('[data-testid="sk-add"]').trigger('click');
    await w.get('[data-testid="sk-add-id"]').setValue('Shard_1');
    await w.get('[data-testid="sk-add-save"]').trigger('click');
    await flushPromises();

    expect(store.puts).toHaveLength(1);
    expect(w.get('[data-testid="sk-add-refusal"]').text()).toBe(`Not saved: ${ sentence(admission.refusal) }`);
    expect(store.shardConfigMap.data.shards).toBe('shard0,gpu');
    // The dialog stays open, and the page still shows the list as stored.
    expect(w.find('[role="dialog"]').exists()).toBe(true);
    expect(w.find('[data-testid="sk-row-Shard_1"]').exists()).toBe(false);
  });
});

describe('removing a shard', () => {
  it('says, before saving, that a shard with objects is kept Blocked, names a few, and shows the policy\'s warning', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    await w.get('[data-testid="sk-remove-shard0"]').trigger('click');
    await flushPromises();
    expect(w.get('[data-testid="sk-remove-kept"]').text()).toContain('Shard shard0 still has 1 gitrepos mapped. It will be kept (Blocked)');
    expect(w.get('[data-testid="sk-remove-objects"]').text()).toContain(`gitrepos ${ NS }/api`);
    // Only shard0's: payments is on shard1.
    expect(w.get('[data-testid="sk-remove-objects"]').text()).not.toContain('payments');
    expect(store.puts).toHaveLength(0);

    store.admission = 'warn';
    await w.get('[data-testid="sk-remove-save"]').trigger('click');
    await flushPromises();

    expect(store.puts).toHaveLength(1);
    expect(store.puts[0].data.data.shards).toBe('gpu');
    expect(store.puts[0].data.metadata.annotations['shardkeeper.io/force-delete']).toBeUndefined();
    expect(w.get('[data-testid="sk-remove-warning"]').text()).toBe(`Saved, with a warning: ${ admission.warning }`);
    // The dialog stays open until the operator has read the warning.
    await w.get('[data-testid="sk-remove-close"]').trigger('click');
    await flushPromises();
    expect(w.find('[role="dialog"]').exists()).toBe(false);
  });

  it('says, with placement, that the shard is drained, as the daemon does', async() => {
    const store = new MockStore('shard0,gpu');

    store.shardConfigMap.data.placement = 'namespaces: [apps]';
    const w = await mountPage(store);

    await w.get('[data-testid="sk-remove-shard0"]').trigger('click');
    await flushPromises();
    const kept = w.get('[data-testid="sk-remove-kept"]').text();

    expect(kept).toContain('It will be kept (Draining), its controllers running, until placement moves these objects');
    expect(kept).toContain('or Blocked while one is pinned by a label set by hand');
    expect(kept).not.toContain('(Blocked)');
  });

  it('forces only when asked, as the dangerous choice', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    await w.get('[data-testid="sk-remove-shard0"]').trigger('click');
    await flushPromises();
    const save = w.get('[data-testid="sk-remove-save"]');

    expect(save.text()).toBe('Remove');
    await w.get('[data-testid="sk-remove-force"]').setValue(true);
    expect(save.text()).toBe('Remove and force');
    expect(save.classes()).toContain('bg-error');
    expect(w.text()).toContain('Dangerous: the 1 object(s) left on shard shard0 are stranded');
    await save.trigger('click');
    await flushPromises();

    expect(store.puts).toHaveLength(1);
    expect(store.puts[0].data.data.shards).toBe('gpu');
    expect(store.puts[0].data.metadata.annotations['shardkeeper.io/force-delete']).toBe('shard0');
  });

  it('offers force for a removed shard kept Blocked, leaving the list as it is', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    expect(w.find('[data-testid="sk-force-shard0"]').exists()).toBe(false);
    await w.get('[data-testid="sk-force-shard1"]').trigger('click');
    await flushPromises();
    await w.get('[data-testid="sk-remove-force"]').setValue(true);
    await w.get('[data-testid="sk-remove-save"]').trigger('click');
    await flushPromises();

    expect(store.puts).toHaveLength(1);
    expect(store.puts[0].data.data.shards).toBe('shard0,gpu');
    expect(store.puts[0].data.metadata.annotations['shardkeeper.io/force-delete']).toBe('shard1');
  });

  it('removes a shard without objects at once', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    await w.get('[data-testid="sk-remove-gpu"]').trigger('click');
    await flushPromises();
    expect(w.find('[data-testid="sk-remove-empty"]').exists()).toBe(true);
    expect(w.find('[data-testid="sk-remove-force"]').exists()).toBe(false);
    await w.get('[data-testid="sk-remove-save"]').trigger('click');
    await flushPromises();
    expect(store.puts[0].data.data.shards).toBe('shard0');
    expect(w.find('[role="dialog"]').exists()).toBe(false);
  });

  it('shows a refusal of the removal and saves nothing', async() => {
    const store = new MockStore('shard0,gpu');
    const w = await mountPage(store);

    store.admission = 'refuse';
    await w.get('[data-testid="sk-remove-gpu"]').trigger('click');
    await flushPromises();
    await w.get('[data-testid="sk-remove-save"]').trigger('click');
    await flushPromises();
    expect(w.get('[data-testid="sk-remove-refusal"]').text()).toContain('Not saved: shards[1]');
    expect(store.shardConfigMap.data.shards).toBe('shard0,gpu');
  });
});

describe('a forced removal', () => {
  it('is said while the force annotation names shards', async() => {
    const store = new MockStore('shard0,gpu');

    store.shardConfigMap.metadata.annotations = { 'shardkeeper.io/force-delete': 'shard1' };
    const w = await mountPage(store);

    expect(w.get('[data-testid="sk-force"]').text()).toContain('shardkeeper.io/force-delete is set to "shard1"');
  });

  it('is not said without the annotation', async() => {
    const w = await mountPage(new MockStore('shard0,gpu'));

    expect(w.find('[data-testid="sk-force"]').exists()).toBe(false);
  });
});
