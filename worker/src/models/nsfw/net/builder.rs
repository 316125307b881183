//! Turns an ONNX graph's nodes into the network's steps.

use std::collections::HashMap;

use anyhow::{anyhow, bail, ensure};
use rten_gemm::GemmExecutor;
use rten_onnx::onnx::{AttributeProto, DataType, NodeProto, TensorProto};
use rten_tensor::NdTensorView;

use super::{
    graph::{Conv, Method, Step, ValueId},
    winograd::{Tiling, Winograd},
};

/// The tiling of Winograd's algorithm for an image whose smaller side is `side`: F(4x4) from
/// 16 pixels on, F(2x2) below. Measured on the model, one core, the best of 15 runs of 40
/// images: F(2x2) on the 14 and 7 pixel layers (instead of F(4x4), and of the direct product
/// on 7) took the whole network from 10.84-11.02 to 10.05-10.46 ms; F(2x2) on the 28 or the 56
/// pixel layers made it slower (10.71-11.11 and 11.17-11.29 ms). On small images F(4x4)'s 36
/// products have few rows each (16 on 14x14, 4 on 7x7, a third of those padding).
fn tiling(side: usize) -> Tiling {
    if side >= 16 {
        Tiling::Four
    } else {
        Tiling::Two
    }
}

/// Turns ONNX nodes, in the graph's order, into steps.
pub struct Builder<'a> {
    /// Packs the weights (for the kernel the runs' executors pick too).
    pub gemm: &'a GemmExecutor<f32>,
    /// The graph's initializers, by name.
    pub constants: HashMap<&'a str, &'a TensorProto>,
    /// How many nodes read each value (the graph's output counts as one).
    pub readers: HashMap<&'a str, usize>,
    /// The id of each value computed so far, by name.
    pub values: HashMap<String, ValueId>,
    /// The shape of each value (height, width, channels), by id.
    pub shapes: Vec<[usize; 3]>,
    /// The steps so far, in order.
    pub steps: Vec<Step>,
}

impl Builder<'_> {
    /// The id of the computed value `name`.
    pub fn value(&self, name: &str) -> anyhow::Result<ValueId> {
        self.values
            .get(name)
            .copied()
            .ok_or_else(|| anyhow!("{name} is read before it is computed"))
    }

    fn define(&mut self, name: &str, shape: [usize; 3]) -> ValueId {
        let id = self.values.len();
        self.values.insert(name.to_owned(), id);
        self.shapes.push(shape);
        id
    }

    /// The last step, when it is a convolution whose output is `name` and only one node reads
    /// it: a ReLU or an addition that follows can be merged into it.
    fn mergeable_conv(&mut self, name: &str) -> anyhow::Result<Option<&mut Conv>> {
        let id = self.value(name)?;
        let read_once = self.readers.get(name) == Some(&1);
        Ok(match self.steps.last_mut() {
            Some(Step::Conv(conv)) if conv.output == id && read_once && !conv.relu => Some(conv),
            _ => None,
        })
    }

    /// Adds the step of `node`. A `Relu` must follow a convolution, an `Add` of two values
    /// must add a convolution's output (before its ReLU), and an `Add` of a constant must
    /// follow a `MatMul`: those are the patterns of open_nsfw.
    pub fn add(&mut self, node: &NodeProto) -> anyhow::Result<()> {
        let op = node.op_type.as_deref().unwrap_or_default();
        let [output] = node.output.as_slice() else {
            bail!("{op} with {} outputs", node.output.len());
        };
        let (computed, constant): (Vec<&String>, Vec<&String>) = node
            .input
            .iter()
            .partition(|name| !self.constants.contains_key(name.as_str()));
        let Some(first) = computed.first() else {
            bail!("{op} of constants only");
        };
        let input = self.value(first)?;
        let step = match (op, computed.as_slice(), constant.as_slice()) {
            ("Relu", [name], []) => {
                let Some(conv) = self.mergeable_conv(name)? else {
                    bail!("a Relu is only supported right after a convolution");
                };
                conv.relu = true;
                let id = self.define(output, self.shapes[input]);
                self.set_last_output(id);
                return Ok(());
            }
            ("Add", [a, b], []) => {
                let (conv_name, other) = if self.mergeable_conv(a)?.is_some() {
                    (a, b)
                } else {
                    (b, a)
                };
                let other = self.value(other)?;
                let [shape, conv_shape] = [other, self.value(conv_name)?].map(|id| self.shapes[id]);
                ensure!(
                    conv_shape == shape,
                    "an Add of {conv_shape:?} and {shape:?} values"
                );
                let Some(conv) = self.mergeable_conv(conv_name)? else {
                    bail!("an Add is only supported of a convolution's output");
                };
                ensure!(conv.residual.is_none(), "a second residual addition");
                conv.residual = Some(other);
                let id = self.define(output, shape);
                self.set_last_output(id);
                return Ok(());
            }
            ("Add", [_], [bias]) => {
                let (_, bias) = self.constant(bias)?;
                let id = self.define(output, self.shapes[input]);
                let Some(Step::Dense {
                    output,
                    bias: dense_bias,
                    ..
                }) = self.steps.last_mut()
                else {
                    bail!("an Add of a constant is only supported after a MatMul");
                };
                ensure!(
                    *output == input && dense_bias.len() == bias.len(),
                    "an Add of a constant that is not the MatMul's bias"
                );
                for (total, value) in dense_bias.iter_mut().zip(bias) {
                    *total += value;
                }
                *output = id;
                return Ok(());
            }
            ("Transpose", [_], []) => {
                ensure!(
                    ints(node, "perm") == Some(&[0, 3, 1, 2][..]),
                    "only the NHWC to NCHW Transpose is supported"
                );
                // The graph's value is channels first; the runner's stays channels last.
                Step::Layout {
                    input,
                    output: self.define(output, self.shapes[input]),
                }
            }
            ("Conv", [_], [weights, bias]) => {
                Step::Conv(Box::new(self.conv(node, input, weights, bias, output)?))
            }
            ("MaxPool", [_], []) => {
                let (kernel, stride, pads) = window(node)?;
                let [height, width, channels] = self.shapes[input];
                let [out_h, out_w] = output_size([height, width], kernel, stride, pads)?;
                Step::MaxPool {
                    input,
                    output: self.define(output, [out_h, out_w, channels]),
                    kernel,
                    stride,
                    pads,
                }
            }
            ("AveragePool", [_], []) => {
                let (kernel, _, pads) = window(node)?;
                let [height, width, channels] = self.shapes[input];
                ensure!(
                    pads == [0; 4] && kernel == [height, width],
                    "only an AveragePool of the whole image is supported"
                );
                Step::MeanPool {
                    input,
                    output: self.define(output, [1, 1, channels]),
                }
            }
            ("Reshape", [_], [_shape]) => {
                // Channels last is the graph's (channels first) order only for one pixel.
                let [height, width, channels] = self.shapes[input];
                ensure!(
                    [height, width] == [1, 1],
                    "only a Reshape of one pixel's channels is supported"
                );
                Step::Flatten {
                    input,
                    output: self.define(output, [1, 1, channels]),
                }
            }
            ("MatMul", [_], [weights]) => {
                let (dims, weights) = self.constant(weights)?;
                let [inputs, outputs] = dims[..] else {
                    bail!("MatMul weights of dimensions {dims:?}");
                };
                ensure!(
                    self.shapes[input] == [1, 1, inputs],
                    "a MatMul of {inputs} rows given {:?} values",
                    self.shapes[input]
                );
                Step::Dense {
                    input,
                    output: self.define(output, [1, 1, outputs]),
                    bias: vec![0.0; outputs],
                    outputs,
                    weights,
                }
            }
            ("Softmax", [_], []) => {
                ensure!(
                    int(node, "axis").is_none_or(|axis| axis == 1 || axis == -1),
                    "a Softmax over another axis than the last"
                );
                Step::Softmax {
                    input,
                    output: self.define(output, self.shapes[input]),
                }
            }
            (op, computed, constant) => bail!(
                "{op} of {} values and {} constants is not supported",
                computed.len(),
                constant.len()
            ),
        };
        self.steps.push(step);
        Ok(())
    }

    /// Renames the last step's output (a ReLU or an addition merged into it).
    fn set_last_output(&mut self, id: ValueId) {
        if let Some(Step::Conv(conv)) = self.steps.last_mut() {
            conv.output = id;
        }
    }

    /// A float constant: its dimensions and values.
    fn constant(&self, name: &str) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
        let tensor = self
            .constants
            .get(name)
            .ok_or_else(|| anyhow!("{name} is not a constant"))?;
        let dims = tensor
            .dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| anyhow!("{name}: dimension {d}")))
            .collect::<anyhow::Result<Vec<usize>>>()?;
        ensure!(
            tensor.data_type == Some(DataType::FLOAT),
            "{name}: only float constants are supported"
        );
        let values: Vec<f32> = match &tensor.raw_data {
            Some(raw) => raw
                .borrow()
                .as_chunks::<4>()
                .0
                .iter()
                .map(|&b| f32::from_le_bytes(b))
                .collect(),
            None => tensor.float_data.clone(),
        };
        ensure!(
            values.len() == dims.iter().product::<usize>(),
            "{name}: {} values for dimensions {dims:?}",
            values.len()
        );
        Ok((dims, values))
    }

    fn conv(
        &mut self,
        node: &NodeProto,
        input: ValueId,
        weights: &str,
        bias: &str,
        output: &str,
    ) -> anyhow::Result<Conv> {
        let (dims, weights) = self.constant(weights)?;
        let (_, bias) = self.constant(bias)?;
        let [out_channels, in_channels, kh, kw] = dims[..] else {
            bail!("Conv weights of dimensions {dims:?}");
        };
        ensure!(bias.len() == out_channels, "a Conv bias of another length");
        ensure!(
            int(node, "group").is_none_or(|group| group == 1),
            "grouped convolutions are not supported"
        );
        ensure!(
            ints(node, "dilations").is_none_or(|d| d.iter().all(|&v| v == 1)),
            "dilated convolutions are not supported"
        );
        let (kernel, stride, pads) = window(node)?;
        ensure!(kernel == [kh, kw], "a kernel_shape other than its weights'");
        let [height, width, channels] = self.shapes[input];
        ensure!(
            channels == in_channels,
            "a convolution of {in_channels} channels given {channels}"
        );
        let [out_h, out_w] = output_size([height, width], kernel, stride, pads)?;
        let method = if kernel == [3, 3] && stride == [1, 1] && pads == [1; 4] {
            Method::Winograd(Winograd::new(
                self.gemm,
                tiling(height.min(width)),
                &weights,
                out_channels,
                in_channels,
            ))
        } else {
            // ONNX's `out x in x kh x kw` as the `(kh * kw * in) x out` matrix channels last
            // needs.
            let depth = kh * kw * in_channels;
            let mut matrix = vec![0.0f32; depth * out_channels];
            for (index, &value) in weights.iter().enumerate() {
                let (out_channel, rest) = (index / depth, index % depth);
                let (in_channel, tap) = (rest / (kh * kw), rest % (kh * kw));
                matrix[(tap * in_channels + in_channel) * out_channels + out_channel] = value;
            }
            let matrix = NdTensorView::from_data([depth, out_channels], &matrix[..]);
            Method::Product(self.gemm.prepack_b(matrix))
        };
        Ok(Conv {
            input,
            output: self.define(output, [out_h, out_w, out_channels]),
            residual: None,
            relu: false,
            method,
            bias,
            in_channels,
            kernel,
            stride,
            pads,
        })
    }
}

fn attribute<'a>(node: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    node.attribute
        .iter()
        .find(|attribute| attribute.name.as_deref() == Some(name))
}

fn ints<'a>(node: &'a NodeProto, name: &str) -> Option<&'a [i64]> {
    attribute(node, name).map(|attribute| attribute.ints.as_slice())
}

fn int(node: &NodeProto, name: &str) -> Option<i64> {
    attribute(node, name).and_then(|attribute| attribute.i)
}

/// The output size of a window of `kernel` sliding by `stride` over an image of `size` with
/// `pads` (top, left, bottom, right).
fn output_size(
    [height, width]: [usize; 2],
    [kh, kw]: [usize; 2],
    [sh, sw]: [usize; 2],
    [top, left, bottom, right]: [usize; 4],
) -> anyhow::Result<[usize; 2]> {
    let (padded_h, padded_w) = (height + top + bottom, width + left + right);
    ensure!(
        padded_h >= kh && padded_w >= kw,
        "a {kh}x{kw} window over a {height}x{width} image"
    );
    Ok([(padded_h - kh) / sh + 1, (padded_w - kw) / sw + 1])
}

/// A Conv's or a pool's `kernel_shape`, `strides` and `pads` (top, left, bottom, right).
fn window(node: &NodeProto) -> anyhow::Result<([usize; 2], [usize; 2], [usize; 4])> {
    if let Some(mode) = attribute(node, "auto_pad").and_then(|a| a.s.as_deref()) {
        ensure!(mode == "NOTSET", "auto_pad {mode} is not supported");
    }
    let pair = |name: &str, default: [usize; 2]| -> anyhow::Result<[usize; 2]> {
        match ints(node, name) {
            None => Ok(default),
            Some(&[a, b]) if a > 0 && b > 0 => Ok([a as usize, b as usize]),
            Some(other) => bail!("{name} {other:?} is not supported"),
        }
    };
    let kernel = pair("kernel_shape", [0, 0])?;
    ensure!(kernel != [0, 0], "kernel_shape is missing");
    let stride = pair("strides", [1, 1])?;
    let pads = match ints(node, "pads") {
        None => [0; 4],
        Some(&[t, l, b, r]) if [t, l, b, r].iter().all(|&p| p >= 0) => {
            [t as usize, l as usize, b as usize, r as usize]
        }
        Some(other) => bail!("pads {other:?} are not supported"),
    };
    Ok((kernel, stride, pads))
}
