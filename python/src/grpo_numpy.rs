//! GRPO advantages and policy loss over NumPy arrays.

use crate::prelude::*;

pub(crate) static BYTES_COPIED: AtomicU64 = AtomicU64::new(0);

/// Bytes the GRPO bindings copied out of input arrays since the process started (0 for
/// C-contiguous inputs of the native dtypes: float32 values, uint8/bool masks, uint64 offsets).
#[pyfunction]
pub(crate) fn grpo_bytes_copied() -> u64 {
    BYTES_COPIED.load(Ordering::Relaxed)
}

/// A read-only view of any dimension as a flat slice in C order: zero-copy when contiguous,
/// else copied (and counted).
pub(crate) fn flat<'a, T: numpy::Element + Copy, D: numpy::ndarray::Dimension>(
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
    owned: &'a mut Vec<T>,
) -> &'a [T] {
    match a.as_slice() {
        Ok(s) => s,
        Err(_) => {
            *owned = a.as_array().iter().copied().collect();
            BYTES_COPIED.fetch_add(
                (owned.len() * std::mem::size_of::<T>()) as u64,
                Ordering::Relaxed,
            );
            owned
        }
    }
}

/// A mask given as uint8 or bool (bools are bytes 0/1: reinterpreted without a copy).
pub(crate) enum Mask<'py> {
    U8(PyReadonlyArray1<'py, u8>),
    Bool(PyReadonlyArray1<'py, bool>),
}

pub(crate) fn mask_slice<'a>(m: &'a Mask<'_>, owned: &'a mut Vec<u8>) -> &'a [u8] {
    match m {
        Mask::U8(a) => flat(a, owned),
        Mask::Bool(a) => match a.as_slice() {
            // SAFETY: bool is one byte holding 0 or 1.
            Ok(s) => unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), s.len()) },
            Err(_) => {
                *owned = a.as_array().iter().map(|&b| u8::from(b)).collect();
                BYTES_COPIED.fetch_add(owned.len() as u64, Ordering::Relaxed);
                owned
            }
        },
    }
}

pub(crate) fn extract_mask<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Mask<'py>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, u8>>() {
        return Ok(Mask::U8(a));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, bool>>() {
        return Ok(Mask::Bool(a));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "mask must be a 1-D numpy array of uint8 or bool",
    ))
}

/// Offsets as usize: uint64 arrays are viewed in place (64-bit platforms), int64 copied.
pub(crate) fn offsets_vec<'py>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<(Option<PyReadonlyArray1<'py, u64>>, Vec<usize>)> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, u64>>() {
        if cfg!(target_pointer_width = "64") && a.as_slice().is_ok() {
            return Ok((Some(a), Vec::new()));
        }
        let v: Vec<usize> = a.as_array().iter().map(|&x| x as usize).collect();
        BYTES_COPIED.fetch_add((v.len() * 8) as u64, Ordering::Relaxed);
        return Ok((None, v));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, i64>>() {
        let mut v = Vec::with_capacity(a.len());
        for &x in a.as_array().iter() {
            v.push(usize::try_from(x).map_err(|_| err(format!("negative offset {x}")))?);
        }
        BYTES_COPIED.fetch_add((v.len() * 8) as u64, Ordering::Relaxed);
        return Ok((None, v));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "offsets must be a 1-D numpy array of uint64 or int64",
    ))
}

pub(crate) fn stats_to_py<'py>(py: Python<'py>, s: &GrpoStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("loss", s.loss)?;
    d.set_item("tokens", s.tokens)?;
    d.set_item("sequences", s.sequences)?;
    d.set_item("clip_frac_low", s.clip_frac_low)?;
    d.set_item("clip_frac_high", s.clip_frac_high)?;
    d.set_item("dual_clip_frac", s.dual_clip_frac)?;
    d.set_item("mean_ratio", s.mean_ratio)?;
    d.set_item("approx_kl_k1", s.approx_kl_k1)?;
    d.set_item("approx_kl_k3", s.approx_kl_k3)?;
    Ok(d)
}

/// Group-normalised advantages of `rewards` (float32, groups of `group_size` consecutive
/// sequences), written into `out` (float32, same length). `config` is a GRPO config dict
/// (`std`, `eps`, `mean_only`, `clip_low`, `clip_high`, `dual_clip`, `ratio_cap`,
/// `aggregation`).
#[pyfunction]
#[pyo3(signature = (rewards, group_size, out, config=None))]
pub(crate) fn group_advantages(
    py: Python<'_>,
    rewards: PyReadonlyArray1<'_, f32>,
    group_size: usize,
    mut out: PyReadwriteArray1<'_, f32>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let mut owned = Vec::new();
    let r = flat(&rewards, &mut owned);
    let out = out
        .as_slice_mut()
        .map_err(|_| err("out must be a C-contiguous float32 array"))?;
    py.allow_threads(|| grpo::group_advantages(r, group_size, &cfg, out))
        .map_err(err)
}

/// Clipped-surrogate loss over a ragged batch: flat float32 `logp_old`/`logp_new`, a
/// uint8/bool `mask`, `offsets` (uint64 or int64, sequences + 1 entries) and one float32
/// advantage per sequence; writes d loss / d logp_new into `grad` and returns the loss and
/// metrics as a dict.
#[pyfunction]
#[pyo3(signature = (logp_old, logp_new, mask, offsets, advantages, grad, config=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn policy_loss<'py>(
    py: Python<'py>,
    logp_old: PyReadonlyArray1<'py, f32>,
    logp_new: PyReadonlyArray1<'py, f32>,
    mask: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    advantages: PyReadonlyArray1<'py, f32>,
    mut grad: PyReadwriteArray1<'py, f32>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let mask = extract_mask(mask)?;
    let (off_view, off_owned) = offsets_vec(offsets)?;
    let off: &[usize] = match &off_view {
        // SAFETY: u64 and usize have the same size and alignment on 64-bit targets (checked
        // when the view was taken).
        Some(a) => {
            let s = a.as_slice().map_err(err)?;
            unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<usize>(), s.len()) }
        }
        None => &off_owned,
    };
    let (mut o1, mut o2, mut o3, mut o4) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let old = flat(&logp_old, &mut o1);
    let new = flat(&logp_new, &mut o2);
    let m = mask_slice(&mask, &mut o3);
    let adv = flat(&advantages, &mut o4);
    let g = grad
        .as_slice_mut()
        .map_err(|_| err("grad must be a C-contiguous float32 array"))?;
    let stats = py
        .allow_threads(|| -> Result<GrpoStats, grpo::GrpoError> {
            let batch = TokenBatch::ragged(old, new, m, off)?;
            grpo::policy_loss(&batch, adv, &cfg, g)
        })
        .map_err(err)?;
    stats_to_py(py, &stats)
}

/// Like [`policy_loss`] for a padded batch: 2-D float32 `logp_old`/`logp_new` and a 2-D
/// uint8 `mask` (rows x cols; padding has mask 0), `grad` 2-D float32 of the same shape.
#[pyfunction]
#[pyo3(signature = (logp_old, logp_new, mask, advantages, grad, config=None))]
pub(crate) fn policy_loss_padded<'py>(
    py: Python<'py>,
    logp_old: PyReadonlyArray2<'py, f32>,
    logp_new: PyReadonlyArray2<'py, f32>,
    mask: PyReadonlyArray2<'py, u8>,
    advantages: PyReadonlyArray1<'py, f32>,
    mut grad: PyReadwriteArray2<'py, f32>,
    config: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg: GrpoConfig = from_py(py, config, "GRPO config")?;
    let shape = logp_old.shape().to_vec();
    for (name, s) in [
        ("logp_new", logp_new.shape()),
        ("mask", mask.shape()),
        ("grad", grad.shape()),
    ] {
        if s != shape.as_slice() {
            return Err(err(format!(
                "{name} has shape {s:?}, logp_old has {shape:?}"
            )));
        }
    }
    let (mut o1, mut o2, mut o3, mut o4) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let old = flat(&logp_old, &mut o1);
    let new = flat(&logp_new, &mut o2);
    let m = flat(&mask, &mut o3);
    let adv = flat(&advantages, &mut o4);
    let g = grad
        .as_slice_mut()
        .map_err(|_| err("grad must be a C-contiguous float32 array"))?;
    let stats = py
        .allow_threads(|| -> Result<GrpoStats, grpo::GrpoError> {
            let batch = TokenBatch::padded(old, new, m, shape[0], shape[1])?;
            grpo::policy_loss(&batch, adv, &cfg, g)
        })
        .map_err(err)?;
    stats_to_py(py, &stats)
}
