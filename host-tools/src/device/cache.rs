//! A device's own activations read over the wire into an [`ActivationCache`] (`microlens device cache`,
//! the Python package's `Device.run_with_cache`): every hook point, layer and head whose
//! TransformerLens 2.x name is wanted, at every position consumed since the last reset.

use anyhow::Result;
use microlens::{Config, HookKind, HookKinds, HookPoint};

use crate::device::Device;
use crate::eval::cache::{hook_name, ActivationCache};

impl Device {
    /// The activations at positions `0..n_pos` (those consumed since the last reset) of every
    /// `(kind, layer)` of a model of `cfg` whose 2.x name `wanted` keeps, each replayed with the output
    /// projection head by head if `attn_result` (as the host runs it when it records `hook_result`);
    /// points the device's model or build lacks are left out.
    pub fn read_cache(
        &mut self,
        cfg: &Config,
        n_pos: usize,
        attn_result: bool,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<ActivationCache> {
        let mut cache = ActivationCache::new(HookKinds::ALL);
        for kind in HookKind::ALL {
            let layers = if kind.per_layer() { cfg.n_layers } else { 1 };
            let heads = if kind.per_head() { cfg.n_heads } else { 1 };
            for layer in 0..layers {
                let name = hook_name(kind, layer);
                if !wanted(&name) {
                    continue;
                }
                for head in 0..heads {
                    // A point the model or build lacks: none of its heads exists.
                    let Some(rows) = self.read(&name, head, (0, n_pos), attn_result)? else {
                        break;
                    };
                    for (pos, act) in rows.into_iter().enumerate() {
                        let point = HookPoint {
                            kind,
                            layer,
                            head,
                            pos,
                        };
                        cache.insert(point, act);
                    }
                }
            }
        }
        Ok(cache)
    }
}
