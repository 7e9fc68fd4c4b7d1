/** A Docker image reference split into its name (`repo[:tag]`) and optional `sha256:` digest. */
export interface ImageRef {
  name: string;
  digest: string | null;
}

export function splitImageRef(ref: string): ImageRef {
  const at = ref.indexOf('@');
  return at === -1 ? { name: ref, digest: null } : { name: ref.slice(0, at), digest: ref.slice(at + 1) };
}
