// Prefix affinity for load-aware picks, as the Gateway API Inference Extension's prefix-cache scorer
// does it: a prompt is cut into blocks of PREFIX_AFFINITY_BLOCK_CHARS characters, each block's key a
// digest of the prompt up to its end (so a key stands for the whole prefix before it), and the
// gateway remembers which replica it last sent each key to. A call whose prompt shares leading
// blocks with an earlier one goes to the replica that holds the longest such prefix in its KV cache
// (vLLM's and llama.cpp's prefix caches then skip those tokens' prompt work), while that replica has
// room: its queue is no longer than the shortest among the candidates and its cache is not nearly
// full. Otherwise the load-aware pick stands, and the prefix is remembered for the replica it chose.
import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** Blocks of a prompt looked at: the first 64 (16,384 characters at the default block size). */
export const MAX_PREFIX_BLOCKS = 64;
/** Keys remembered, the least recently used forgotten first (about 4 MB at most). */
const MAX_KEYS = 65_536;
/** A replica whose KV cache is this full has no room: its cached prefixes are about to be evicted. */
export const FULL_KV_CACHE = 0.9;

/**
 * The keys of a prompt's whole blocks for one model (`model` is digested first, so two models'
 * replicas never share a key), in order: the i-th is a digest (SHA-1, one native call a block) of the
 * first i + 1 blocks. The prompt is
 * given as the parts it is made of, in order (a chat's roles and contents), read as one text. A
 * prompt shorter than one block has none (no prefix worth keeping a replica for). Pure.
 */
export function prefixKeys(model: string, parts: readonly string[], blockChars: number, maxBlocks = MAX_PREFIX_BLOCKS): string[] {
  const keys: string[] = [];
  if (blockChars <= 0) return keys;
  let key = model;
  let block = '';
  for (const part of parts) {
    for (let at = 0; at < part.length; ) {
      const take = Math.min(part.length - at, blockChars - block.length);
      block += part.slice(at, at + take);
      at += take;
      if (block.length < blockChars) continue;
      // A key is the digest of the key before it and its block: it stands for the whole prefix.
      key = hash('sha1', `${key}\0${block}`, 'base64url');
      keys.push(key);
      if (keys.length === maxBlocks) return keys;
      block = '';
    }
  }
  return keys;
}

/** What the index needs to know of a candidate: its queue (the load pick's) and cache share. */
export interface RoomCandidate {
  address: string;
  queue: number;
  kvCache: number | undefined;
}

/** Which replica last took each prefix key of a model's prompts. */
export class PrefixIndex {
  private readonly holders = new LRUCache<string, string>({ max: MAX_KEYS });

  /** The replica holding the longest of `keys` among `candidates`, with how many blocks it holds. */
  longest(keys: readonly string[], candidates: readonly string[]): { address: string; blocks: number } | undefined {
    for (let i = keys.length - 1; i >= 0; i--) {
      const address = this.holders.get(keys[i]);
      if (address !== undefined && candidates.includes(address)) return { address, blocks: i + 1 };
    }
    return undefined;
  }

  /** The replica now holds every key of the prompt it was sent. */
  record(keys: readonly string[], address: string): void {
    for (const k of keys) this.holders.set(k, address);
  }

  /**
   * The replica to prefer for a prompt of `keys`: the holder of its longest known prefix when it has
   * room (its queue no longer than the shortest, its cache below FULL_KV_CACHE), else undefined.
   */
  preferred(keys: readonly string[], candidates: readonly RoomCandidate[]): string | undefined {
    if (keys.length === 0) return undefined;
    const held = this.longest(keys, candidates.map((c) => c.address));
    if (!held) return undefined;
    const holder = candidates.find((c) => c.address === held.address) as RoomCandidate;
    const shortest = Math.min(...candidates.map((c) => c.queue));
    return holder.queue <= shortest && (holder.kvCache ?? 0) < FULL_KV_CACHE ? holder.address : undefined;
  }
}
