import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { api } from './api';
import { useConfirm, type Question } from './components';
import { useAction, useLoad } from './load';

/**
 * One resource's page (an audience, a client): its document, loaded with its ETag from the admin API's `path`;
 * the draft its form edits, made from the document at each load; saving the draft as a change of the version
 * loaded (PATCH with If-Match), then loading it again; deleting it (DELETE with If-Match) once the operator
 * confirms, then going to another page.
 */
export function useResource<T, D>(path: string, draftOf: (resource: T) => D) {
  const { route } = useLocation();
  const [draft, setDraft] = useState<D>();
  const [saved, setSaved] = useState(false);
  const loaded = useLoad(async () => {
    const answer = await api.get<T>(path);
    setDraft(draftOf(answer.body));
    return answer;
  }, [path]);
  const save = useAction();
  const remove = useAction();
  const { dialog, ask } = useConfirm();

  /** The form's submit: the draft as the API takes it (`bodyOf` may refuse a field, as an ApiError). */
  const submit = (bodyOf: (draft: D) => unknown) => async (event: Event) => {
    event.preventDefault();
    if (draft === undefined || !loaded.data) return;
    setSaved(false);
    const done = await save.run(() => api.patch<T>(path, bodyOf(draft), loaded.data!.etag));
    if (done) {
      setSaved(true);
      await loaded.reload();
    }
  };

  /** Deletes the resource if the operator says yes to `question`; then the page is `then`. */
  const destroy = async (question: Question, then: string) => {
    if (!loaded.data) return;
    if (!(await ask(question))) return;
    const done = await remove.run(() => api.delete(path, loaded.data!.etag));
    if (done !== undefined) route(then);
  };

  return { loaded, draft, setDraft, saved, save, submit, remove, destroy, ask, dialog };
}
