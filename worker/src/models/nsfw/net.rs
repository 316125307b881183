//! open_nsfw's network, run on rten-gemm's matrix products rather than rten's graph runtime.
//!
//! On rten 0.27 the model ran 1.7 times slower than onnxruntime: rten packs the 3x3 and 7x7
//! convolutions through a scalar im2col gather, pools with a scalar loop and keeps images
//! channels first (docs/models-nsfw.md). This runner reads the same ONNX file (rten-onnx's
//! parser) and executes its operators itself, with every image channels last:
//!
//! - a convolution is one matrix product of the image (its windows unfolded by contiguous
//!   copies, in blocks that stay in cache) with the weights, packed once at load; the
//!   batch-norm is already folded into the weights by the export;
//! - the 3x3 convolutions of stride 1 use Winograd's algorithm ([`winograd`]): F(4x4) on
//!   images of 16 pixels and more (4 times fewer multiplications), F(2x2) on smaller ones
//!   (2.25 times fewer), chosen at load from the sizes the model's declared input gives every
//!   layer;
//! - the ReLU, or the residual addition and the ReLU, after a convolution are applied in the
//!   same pass as its bias.
//!
//! Only the operators and patterns this model uses are known (see [`Builder::add`]); any other
//! graph fails to load, naming the node.

mod builder;
mod graph;
mod ops;
#[cfg(test)]
mod tests;
mod winograd;

use std::{
    collections::HashMap,
    fs::File,
    path::Path,
    sync::{Mutex, PoisonError},
};

use anyhow::{anyhow, bail, ensure, Context};
use rayon::{ThreadPool, ThreadPoolBuilder};
use rten_gemm::GemmExecutor;
use rten_onnx::onnx::{ModelProto, TensorProto, ValueInfoProto};
use rten_simd::SimdOp;

use builder::Builder;
use graph::{Conv, Method, Step, ValueId};
use ops::{conv_product, max_pool, Buffers, Finish, Tensor};
use winograd::Epilogue;

/// A loaded network: its steps in execution order, shared by every job of the process; `run`
/// may be called from several threads at once.
pub struct Network {
    steps: Vec<Step>,
    /// The step after which each value is no longer read (its buffer is then reused).
    last_use: Vec<usize>,
    input: ValueId,
    /// The input's shape (height, width, channels), from the graph's declaration.
    input_shape: [usize; 3],
    output: ValueId,
    /// Scratch space not in use by a run.
    idle: Mutex<Vec<Scratch>>,
}

/// What a run needs besides the network, kept for the next run.
struct Scratch {
    /// The single thread the run's matrix products use (rten-gemm splits work over the
    /// current rayon pool: a run keeps to one core, as rten's runs do in `onnx.rs`).
    pool: ThreadPool,
    buffers: Buffers,
}

impl Network {
    /// Loads the ONNX model at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let file =
            File::open(path).with_context(|| format!("{} could not be opened", path.display()))?;
        let model = ModelProto::parse_file(file)
            .map_err(|err| anyhow!("{} could not be parsed: {err}", path.display()))?;
        Self::from_model(model).with_context(|| path.display().to_string())
    }

    /// The network of a parsed ONNX model.
    fn from_model(model: ModelProto) -> anyhow::Result<Self> {
        let graph = model.graph.ok_or_else(|| anyhow!("no graph"))?;
        let gemm = GemmExecutor::<f32>::new();
        let constants: HashMap<&str, &TensorProto> = graph
            .initializer
            .iter()
            .filter_map(|tensor| Some((tensor.name.as_deref()?, tensor)))
            .collect();
        let [inputs, outputs] = [&graph.input, &graph.output].map(|list| {
            list.iter()
                .filter_map(|info| info.name.as_deref())
                .filter(|name| !constants.contains_key(name))
                .collect::<Vec<&str>>()
        });
        let ([input], [output]) = (inputs.as_slice(), outputs.as_slice()) else {
            bail!("expected one input and one output");
        };
        let input_shape = declared_shape(&graph.input, input)?;
        let mut readers: HashMap<&str, usize> = HashMap::from([(*output, 1)]);
        for name in graph.node.iter().flat_map(|node| &node.input) {
            *readers.entry(name.as_str()).or_default() += 1;
        }
        let mut builder = Builder {
            gemm: &gemm,
            constants,
            readers,
            values: HashMap::from([((*input).to_owned(), 0)]),
            shapes: vec![input_shape],
            steps: Vec::new(),
        };
        for node in &graph.node {
            builder
                .add(node)
                .with_context(|| format!("node {}", node.name.as_deref().unwrap_or("(unnamed)")))?;
        }
        let output = builder.value(output)?;
        let steps = builder.steps;
        let mut last_use = vec![usize::MAX; builder.values.len()];
        for (index, step) in steps.iter().enumerate() {
            for input in step.inputs() {
                last_use[input] = index;
            }
        }
        last_use[output] = usize::MAX;
        Ok(Self {
            steps,
            last_use,
            input: 0,
            input_shape,
            output,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Runs the network on one image of the model's input shape (height, width, channels:
    /// channels last, as the model declares it) and returns its output's values, on one core.
    pub fn run(&self, image: &[f32]) -> anyhow::Result<Vec<f32>> {
        let shape = self.input_shape;
        ensure!(
            image.len() == shape.iter().product::<usize>(),
            "expected {shape:?} values, got {}",
            image.len()
        );
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut scratch = match idle {
            Some(scratch) => scratch,
            None => Scratch {
                pool: ThreadPoolBuilder::new().num_threads(1).build()?,
                buffers: Buffers::default(),
            },
        };
        let Scratch { pool, buffers } = &mut scratch;
        // An executor per run: it is neither `Send` nor `Sync`. It picks the same kernel as the
        // one that packed the weights at load (the CPU's best).
        let gemm = GemmExecutor::<f32>::new();
        let result = pool.install(|| self.execute(&gemm, image, shape, buffers));
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(scratch);
        result
    }

    fn execute(
        &self,
        gemm: &GemmExecutor<f32>,
        image: &[f32],
        shape: [usize; 3],
        buffers: &mut Buffers,
    ) -> anyhow::Result<Vec<f32>> {
        let mut values: Vec<Option<Tensor>> = Vec::new();
        values.resize_with(self.last_use.len(), || None);
        let mut input = buffers.tensor(shape);
        input.data_mut().copy_from_slice(image);
        values[self.input] = Some(input);
        for (index, step) in self.steps.iter().enumerate() {
            let output = self.execute_step(gemm, step, &values, buffers)?;
            values[step.output()] = Some(output);
            for input in step.inputs() {
                if self.last_use[input] == index {
                    if let Some(tensor) = values[input].take() {
                        buffers.free.push(tensor.buf);
                    }
                }
            }
        }
        let output = values[self.output]
            .take()
            .ok_or_else(|| anyhow!("the network's output was not computed"))?;
        let row = output.data().to_vec();
        buffers.free.push(output.buf);
        Ok(row)
    }

    fn execute_step(
        &self,
        gemm: &GemmExecutor<f32>,
        step: &Step,
        values: &[Option<Tensor>],
        buffers: &mut Buffers,
    ) -> anyhow::Result<Tensor> {
        let value = |id: ValueId| {
            values[id]
                .as_ref()
                .ok_or_else(|| anyhow!("value {id} read before it was computed"))
        };
        Ok(match step {
            Step::Layout { input, .. } => {
                let input = value(*input)?;
                let mut out = buffers.tensor(input.shape);
                out.data_mut().copy_from_slice(input.data());
                out
            }
            Step::Conv(conv) => {
                let residual = conv.residual.map(value).transpose()?;
                self.conv(gemm, conv, value(conv.input)?, residual, buffers)?
            }
            Step::MaxPool {
                input,
                kernel,
                stride,
                pads,
                ..
            } => max_pool(value(*input)?, *kernel, *stride, *pads, buffers)?,
            Step::MeanPool { input, .. } => {
                let input = value(*input)?;
                let [height, width, channels] = input.shape;
                let mut out = buffers.tensor([1, 1, channels]);
                let sums = out.data_mut();
                sums.fill(0.0);
                for pixel in input.data().chunks_exact(channels) {
                    for (sum, value) in sums.iter_mut().zip(pixel) {
                        *sum += value;
                    }
                }
                for sum in sums {
                    *sum /= (height * width) as f32;
                }
                out
            }
            Step::Flatten { input, .. } => {
                let input = value(*input)?;
                let mut out = buffers.tensor([1, 1, input.len()]);
                out.data_mut().copy_from_slice(input.data());
                out
            }
            Step::Dense {
                input,
                weights,
                bias,
                outputs,
                ..
            } => {
                let input = value(*input)?;
                ensure!(
                    input.len() * outputs == weights.len(),
                    "a row of {} values for a matrix of {} values",
                    input.len(),
                    weights.len()
                );
                let mut out = buffers.tensor([1, 1, *outputs]);
                for (column, o) in out.data_mut().iter_mut().enumerate() {
                    let products = input
                        .data()
                        .iter()
                        .zip(weights.iter().skip(column).step_by(*outputs));
                    *o = bias[column] + products.map(|(x, w)| x * w).sum::<f32>();
                }
                out
            }
            Step::Softmax { input, .. } => {
                let input = value(*input)?;
                let mut out = buffers.tensor(input.shape);
                let max = input.data().iter().copied().fold(f32::MIN, f32::max);
                for (o, x) in out.data_mut().iter_mut().zip(input.data()) {
                    *o = (x - max).exp();
                }
                let sum: f32 = out.data().iter().sum();
                for o in out.data_mut() {
                    *o /= sum;
                }
                out
            }
        })
    }

    fn conv(
        &self,
        gemm: &GemmExecutor<f32>,
        conv: &Conv,
        input: &Tensor,
        residual: Option<&Tensor>,
        buffers: &mut Buffers,
    ) -> anyhow::Result<Tensor> {
        let [height, width, channels] = input.shape;
        ensure!(
            channels == conv.in_channels,
            "a convolution of {} channels got {channels}",
            conv.in_channels
        );
        let [kh, kw] = conv.kernel;
        let [sh, sw] = conv.stride;
        let [top, left, bottom, right] = conv.pads;
        ensure!(
            height + top + bottom >= kh && width + left + right >= kw,
            "a {kh}x{kw} convolution of a {height}x{width} image"
        );
        let [out_h, out_w] = [
            (height + top + bottom - kh) / sh + 1,
            (width + left + right - kw) / sw + 1,
        ];
        let mut out = buffers.tensor([out_h, out_w, conv.bias.len()]);
        if let Some(residual) = residual {
            ensure!(
                residual.shape == out.shape,
                "a residual of {:?} for an output of {:?}",
                residual.shape,
                out.shape
            );
        }
        let epilogue = Epilogue {
            bias: &conv.bias,
            residual: residual.map(Tensor::data),
            relu: conv.relu,
        };
        match &conv.method {
            Method::Winograd(winograd) => {
                let mut scratch = buffers.take(winograd.scratch_len([height, width]));
                let run = winograd.run(
                    gemm,
                    input.data(),
                    [height, width],
                    out.data_mut(),
                    &epilogue,
                    &mut scratch,
                );
                buffers.free.push(scratch);
                run?;
            }
            Method::Product(weights) => {
                conv_product(gemm, conv, weights, input, out_w, out.data_mut(), buffers)?;
                Finish {
                    out: out.data_mut(),
                    residual: epilogue.residual,
                    relu: epilogue.relu,
                }
                .dispatch();
            }
        }
        Ok(out)
    }
}

/// The declared shape of the input `name`: `[batch, height, width, channels]` (channels last,
/// as open_nsfw's input), its batch 1 or left open, the others fixed; as height, width,
/// channels.
fn declared_shape(inputs: &[ValueInfoProto], name: &str) -> anyhow::Result<[usize; 3]> {
    let dims: Vec<Option<usize>> = inputs
        .iter()
        .find(|info| info.name.as_deref() == Some(name))
        .and_then(|info| info.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref())
        .map(|shape| {
            shape
                .dim
                .iter()
                .map(|dim| dim.dim_value.and_then(|v| usize::try_from(v).ok()))
                .collect()
        })
        .unwrap_or_default();
    match dims[..] {
        [None | Some(1), Some(height), Some(width), Some(channels)] => {
            Ok([height, width, channels])
        }
        _ => bail!("the input {name} must be declared [batch, height, width, channels]"),
    }
}
