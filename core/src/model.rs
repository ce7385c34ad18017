//! A validated model: a blob whose every tensor has been checked against its config, read in place.

#[cfg(feature = "std")]
use crate::blob::TokenizerRecord;
use crate::blob::{scales_valid, Activations, Blob, DType, Processing, TensorEntry, SCALE_BYTES};
use crate::config::Config;
use crate::error::{Error, Inconsistency};
use crate::features::Features;
use crate::integer::plan::Plan;
use crate::kv_cache::KvCache;
use crate::tensors::{Catalogue, TensorId};
#[cfg(feature = "std")]
use crate::weights::host::HostWeights;
use crate::weights::{Matrix, Vector};
use crate::workspace::{IntegerBuffers, Workspace};

/// A model read in place from a blob. Cheap to copy: it holds the config and borrowed slices.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    config: Config,
    processing: Processing,
    activations: Activations,
    /// The blob's tokenizer record (host builds only: a device never tokenizes, and its `Model`
    /// stays as small as before the record existed).
    #[cfg(feature = "std")]
    tokenizer: Option<TokenizerRecord>,
    catalogue: Catalogue,
    /// The integer plan (the integer-only arithmetic; only in a build with it, so that no other
    /// firmware's `Model` grows).
    #[cfg(feature = "arith-integer")]
    integer: Option<Plan<'a>>,
    table: &'a [u8],
    data: &'a [u8],
    blob_len: usize,
    /// The host's blocked copy of the matrices ([`Model::with_host`]).
    #[cfg(feature = "std")]
    host: Option<&'a HostWeights>,
}

fn inconsistent(why: Inconsistency) -> Error {
    Error::Inconsistent(why)
}

/// Checks one entry against the tensor the config expects at `index`.
fn check_entry(
    cfg: &Config,
    data: &[u8],
    index: usize,
    id: TensorId,
    e: &TensorEntry,
) -> Result<(), Error> {
    if e.id() != id {
        return Err(inconsistent(Inconsistency::TensorOrder { index }));
    }
    let [rows, cols] = id.shape(cfg);
    if (e.rows as usize, e.cols as usize) != (rows, cols) {
        return Err(inconsistent(Inconsistency::Shape { index }));
    }
    if !id.kind.is_matrix() && e.dtype != DType::F32 {
        return Err(inconsistent(Inconsistency::DType { index }));
    }
    let len = e
        .dtype
        .data_len(rows, cols)
        .ok_or(inconsistent(Inconsistency::Length { index }))?;
    let n_scales = e
        .dtype
        .n_scales(rows, cols)
        .ok_or(inconsistent(Inconsistency::Length { index }))?;
    // The scales, then (an `I8` matrix's, optionally) its rows' exact sums.
    let scales_len = SCALE_BYTES * n_scales;
    let with_sums = e
        .dtype
        .row_sums_len(rows)
        .and_then(|n| n.checked_add(scales_len))
        .ok_or(inconsistent(Inconsistency::Length { index }))?;
    let stored = e.scales_len as usize;
    if e.len as usize != len || (stored != scales_len && stored != with_sums) {
        return Err(inconsistent(Inconsistency::Length { index }));
    }
    let within = |offset: u32, len: u32| {
        (offset as usize)
            .checked_add(len as usize)
            .is_some_and(|end| end <= data.len())
    };
    if !within(e.offset, e.len) || !within(e.scales_offset, e.scales_len) {
        return Err(inconsistent(Inconsistency::Bounds { index }));
    }
    let scales = &data[e.scales_offset as usize..e.scales_offset as usize + scales_len];
    if !scales_valid(scales) {
        return Err(inconsistent(Inconsistency::Scale { index }));
    }
    Ok(())
}

/// The integer plan of a blob of the integer-only arithmetic, after checking that the arithmetic
/// covers the model: int8 matrices, or int4 ones of at most [`crate::integer::units::MAX_COLS`]
/// columns, and a config [`crate::integer::plan::check_config`] takes.
fn integer_plan<'a>(
    cfg: &Config,
    plan: Option<&'a [u8]>,
    dtypes: impl Iterator<Item = DType> + Clone,
) -> Result<Plan<'a>, Error> {
    let refuse = |what| Error::Inconsistent(Inconsistency::Config(what));
    let int4 = dtypes.clone().all(|d| d == DType::I4);
    if !int4 && !dtypes.clone().all(|d| d == DType::I8) {
        return Err(refuse(
            "the integer arithmetic takes int8 matrices or int4 ones, all of one type",
        ));
    }
    crate::integer::plan::check_config(cfg).map_err(refuse)?;
    // A matrix's row is `d_model`, `d_attn` (`W_O`) or `d_mlp` (`W_out`) wide.
    let widest = cfg.d_model.max(cfg.d_attn()).max(cfg.d_mlp_or_zero());
    if int4 && widest > crate::integer::units::MAX_COLS {
        return Err(refuse(
            "the integer arithmetic takes int4 rows of at most 2048 columns",
        ));
    }
    plan.and_then(|p| Plan::parse(p, cfg, int4))
        .ok_or(refuse("integer plan missing or of the wrong length"))
}

impl<'a> Model<'a> {
    /// Reads a blob: checks preamble, CRC, header, config and every tensor entry. No copy is made.
    pub fn from_bytes(bytes: &'a [u8]) -> Result<Self, Error> {
        let blob = Blob::parse(bytes)?;
        let cfg = blob.header.config;
        cfg.validate()?;
        let catalogue = Catalogue::new(&cfg);
        let table = blob.header.tensors;
        let found = table.len() / crate::blob::ENTRY_LEN;
        if found != catalogue.len() || table.len() % crate::blob::ENTRY_LEN != 0 {
            return Err(inconsistent(Inconsistency::TensorCount {
                expected: catalogue.len(),
                found,
            }));
        }
        for (index, id) in catalogue.ids().enumerate() {
            check_entry(
                &cfg,
                blob.data,
                index,
                id,
                &TensorEntry::decode(table, index)?,
            )?;
        }
        let dtypes = (0..found)
            .filter_map(|i| TensorEntry::decode(table, i).ok())
            .filter(|e| e.kind.is_matrix())
            .map(|e| e.dtype);
        let needed = Features::needed(&cfg, blob.header.activations, dtypes.clone());
        if let Some(feature) = needed.first_missing() {
            return Err(Error::Unsupported { feature });
        }
        // Checked in every build (one without the arithmetic refused the blob above).
        let integer = match blob.header.activations {
            Activations::Integer => Some(integer_plan(&cfg, blob.header.integer, dtypes)?),
            _ => None,
        };
        #[cfg(not(feature = "arith-integer"))]
        let _ = integer;
        Ok(Model {
            config: cfg,
            processing: blob.header.processing,
            activations: blob.header.activations,
            #[cfg(feature = "std")]
            tokenizer: blob.header.tokenizer,
            catalogue,
            #[cfg(feature = "arith-integer")]
            integer,
            table,
            data: blob.data,
            blob_len: blob.len,
            #[cfg(feature = "std")]
            host: None,
        })
    }

    /// The architecture.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// How the weights were processed.
    pub fn processing(&self) -> &Processing {
        &self.processing
    }
    /// Activation arithmetic and KV cache type.
    pub fn activations(&self) -> Activations {
        self.activations
    }
    /// The tokenizer the blob was converted with, if it records one (`std`: the device parses and
    /// checks the record but does not keep it).
    #[cfg(feature = "std")]
    pub fn tokenizer(&self) -> Option<TokenizerRecord> {
        self.tokenizer
    }
    /// `f32` words of KV cache this model needs at full context.
    pub fn kv_cache_len(&self) -> usize {
        KvCache::len(&self.config, self.activations)
    }
    /// `f32` words of workspace this model needs.
    pub fn workspace_len(&self) -> usize {
        self.workspace_len_rows(self.config.n_ctx, 1)
    }
    /// `f32` words of KV cache a session capped at `n_ctx` positions needs ([`crate::Session::with_context`]).
    pub fn kv_cache_len_at(&self, n_ctx: usize) -> usize {
        KvCache::len(&self.config.with_context(n_ctx), self.activations)
    }
    /// `f32` words of workspace a session capped at `n_ctx` positions needs.
    pub fn workspace_len_at(&self, n_ctx: usize) -> usize {
        self.workspace_len_rows(n_ctx, 1)
    }

    /// `f32` words of workspace for a session of at most `n_ctx` positions computing `rows` of them
    /// together (`Session::with_rows`, host only); `rows = 1` is [`Model::workspace_len_at`].
    pub fn workspace_len_rows(&self, n_ctx: usize, rows: usize) -> usize {
        let cfg = self.config.with_context(n_ctx);
        let integer = match self.integer_plan() {
            Some(_) => IntegerBuffers::len(&cfg),
            None => 0,
        };
        Workspace::len_rows(&cfg, rows).saturating_add(integer)
    }

    /// The integer plan of a model of the integer-only arithmetic ([`Activations::Integer`]).
    pub fn integer_plan(&self) -> Option<Plan<'a>> {
        #[cfg(feature = "arith-integer")]
        return self.integer;
        #[cfg(not(feature = "arith-integer"))]
        None
    }
    /// Total blob size in bytes.
    pub fn blob_len(&self) -> usize {
        self.blob_len
    }
    /// Number of tensors.
    pub fn n_tensors(&self) -> usize {
        self.catalogue.len()
    }
    /// The optional crate features this model needs (all present, or `from_bytes` would have failed).
    pub fn features(&self) -> Features {
        let matrices = self.entries().filter(|e| e.kind.is_matrix());
        Features::needed(&self.config, self.activations, matrices.map(|e| e.dtype))
    }

    /// Every tensor entry, in blob order.
    pub fn entries(&self) -> impl Iterator<Item = TensorEntry> + '_ {
        (0..self.catalogue.len()).filter_map(|i| TensorEntry::decode(self.table, i).ok())
    }

    /// The table entry of `id`, or `None` if the model has no such tensor.
    pub fn entry(&self, id: TensorId) -> Option<TensorEntry> {
        TensorEntry::decode(self.table, self.catalogue.slot(id)?).ok()
    }

    fn bytes(&self, offset: u32, len: u32) -> &'a [u8] {
        self.data
            .get(offset as usize..(offset as usize).saturating_add(len as usize))
            .unwrap_or(&[])
    }

    /// The matrix `id`, or `None` if the model has no such tensor.
    pub fn matrix(&self, id: TensorId) -> Option<Matrix<'a>> {
        let slot = self.catalogue.slot(id)?;
        let e = TensorEntry::read(self.table, slot).ok()?;
        let m = Matrix::new(
            e.dtype,
            e.rows as usize,
            e.cols as usize,
            self.bytes(e.offset, e.len),
            self.bytes(e.scales_offset, e.scales_len),
        );
        #[cfg(feature = "std")]
        let m = m.with_blocked(self.host.and_then(|h| h.get(slot)));
        Some(m)
    }

    /// This model computing its float matrix-vector products from `host`, the host's column-blocked
    /// copy of its matrices (the module `host`): the same bits, several times faster on a host CPU.
    /// `host` must have been built from this model's blob ([`HostWeights::new`]); for another blob's
    /// it is ignored.
    #[cfg(feature = "std")]
    pub fn with_host(&self, host: &'a HostWeights) -> Model<'a> {
        let host = host.fits(self.data_span()).then_some(host);
        Model { host, ..*self }
    }

    /// The tensor ids of the model's catalogue, in blob order.
    #[cfg(feature = "std")]
    pub(crate) fn catalogue_ids(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.catalogue.ids()
    }

    /// Address and length of the blob data, which identify it while it is borrowed.
    #[cfg(feature = "std")]
    pub(crate) fn data_span(&self) -> (usize, usize) {
        (self.data.as_ptr() as usize, self.data.len())
    }

    /// The `f32` vector `id`, or `None` if the model has no such tensor.
    pub fn vector(&self, id: TensorId) -> Option<Vector<'a>> {
        let e = TensorEntry::read(self.table, self.catalogue.slot(id)?).ok()?;
        (e.dtype == DType::F32).then(|| Vector::new(self.bytes(e.offset, e.len)))
    }
}
