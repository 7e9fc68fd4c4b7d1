const PT_INTERP = 3;

/**
 * Whether an ELF executable asks for a dynamic loader (has a `PT_INTERP` program header). A
 * `FROM scratch` image has no loader, so only a binary without one runs there.
 */
export function elfNeedsLoader(bytes: Uint8Array): boolean {
  if (bytes.length < 52 || bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) {
    throw new RangeError('not an ELF file');
  }
  const is64 = bytes[4] === 2;
  const little = bytes[5] === 1;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const phoff = is64 ? Number(view.getBigUint64(0x20, little)) : view.getUint32(0x1c, little);
  const phentsize = view.getUint16(is64 ? 0x36 : 0x2a, little);
  const phnum = view.getUint16(is64 ? 0x38 : 0x2c, little);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 > bytes.length) throw new RangeError('truncated ELF program headers');
    if (view.getUint32(at, little) === PT_INTERP) return true;
  }
  return false;
}
