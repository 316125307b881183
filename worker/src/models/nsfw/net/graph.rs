//! The steps of a loaded network and the values they read and write.

use rten_gemm::PackedBMatrix;

use super::winograd::Winograd;

/// Index of a value (an activation) of the graph.
pub type ValueId = usize;

/// A convolution with its bias, then optionally a residual addition, then optionally a ReLU.
pub struct Conv {
    /// The image convolved.
    pub input: ValueId,
    /// The result, after the residual addition and the ReLU when they are merged in.
    pub output: ValueId,
    /// A value added to the convolution's output before the ReLU.
    pub residual: Option<ValueId>,
    /// Whether a ReLU ends it.
    pub relu: bool,
    pub method: Method,
    /// One value per output channel.
    pub bias: Vec<f32>,
    pub in_channels: usize,
    /// Height and width.
    pub kernel: [usize; 2],
    /// Vertical and horizontal.
    pub stride: [usize; 2],
    /// Padding: top, left, bottom, right.
    pub pads: [usize; 4],
}

/// How a convolution is computed, chosen at load from its input's size.
pub enum Method {
    /// One matrix product of the image, or its unfolded windows, with the weights as a
    /// `(kernel[0] * kernel[1] * in_channels) x out_channels` matrix.
    Product(PackedBMatrix<f32>),
    /// Winograd's algorithm (3x3, stride 1, padding 1).
    Winograd(Winograd),
}

/// One step of the network.
pub enum Step {
    /// The model's NHWC to NCHW `Transpose`: values here are always channels last, so a copy.
    Layout {
        input: ValueId,
        output: ValueId,
    },
    Conv(Box<Conv>),
    /// Maximum over windows; the padding never wins.
    MaxPool {
        input: ValueId,
        output: ValueId,
        kernel: [usize; 2],
        stride: [usize; 2],
        pads: [usize; 4],
    },
    /// The mean of each channel (an `AveragePool` whose window is the whole image).
    MeanPool {
        input: ValueId,
        output: ValueId,
    },
    /// A `Reshape` of one pixel's channels to a row: the values as they are.
    Flatten {
        input: ValueId,
        output: ValueId,
    },
    /// A row times a `inputs x outputs` matrix (`MatMul`), plus a bias (an `Add` of a
    /// constant after it).
    Dense {
        input: ValueId,
        output: ValueId,
        weights: Vec<f32>,
        bias: Vec<f32>,
        outputs: usize,
    },
    Softmax {
        input: ValueId,
        output: ValueId,
    },
}

impl Step {
    /// The value this step writes.
    pub fn output(&self) -> ValueId {
        match self {
            Step::Layout { output, .. }
            | Step::MaxPool { output, .. }
            | Step::MeanPool { output, .. }
            | Step::Flatten { output, .. }
            | Step::Dense { output, .. }
            | Step::Softmax { output, .. } => *output,
            Step::Conv(conv) => conv.output,
        }
    }

    /// The values this step reads.
    pub fn inputs(&self) -> Vec<ValueId> {
        match self {
            Step::Layout { input, .. }
            | Step::MaxPool { input, .. }
            | Step::MeanPool { input, .. }
            | Step::Flatten { input, .. }
            | Step::Dense { input, .. }
            | Step::Softmax { input, .. } => vec![*input],
            Step::Conv(conv) => std::iter::once(conv.input).chain(conv.residual).collect(),
        }
    }
}
