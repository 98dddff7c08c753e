import { SaveResult } from './api';

// The state a dialog keeps of its one save of the shard ConfigMap.
export interface SaveState {
  saving: boolean;
  // refusal is the API server's (or the edit's) reason nothing was saved.
  refusal: string;
  // warnings are the API server's warnings on a save that went through.
  warnings: string[];
  // done: the ConfigMap was saved; the dialog only offers to close.
  done: boolean;
}

// runSave runs a dialog's save: save builds the new value and stores it,
// and a throw from either step is the refusal shown, with nothing stored.
// A save with warnings keeps the dialog open until the operator has read
// them; one without closes it.
export async function runSave(state: SaveState, emit: (event: 'saved' | 'close', ...args: unknown[]) => void, save: () => Promise<SaveResult>): Promise<void> {
  state.refusal = '';
  state.warnings = [];
  state.saving = true;
  try {
    const res = await save();

    state.warnings = res.warnings;
    state.done = true;
    emit('saved', res.saved);
    if (res.warnings.length === 0) {
      emit('close');
    }
  } catch (e) {
    state.refusal = (e as Error).message;
  } finally {
    state.saving = false;
  }
}
