/* autodiff.h — reverse-mode differentiation of a forward graph (the training step around it
 * is assembled in planner/train_step.c).
 *
 * Gradients accumulate in a fixed order: the first node (in schedule order) that contributes
 * to a tensor's gradient writes it, every later one adds to it (its accum bit is set). Since
 * the schedule is fixed, so is every summation order.
 */
#ifndef SG_AUTODIFF_H
#define SG_AUTODIFF_H

#include "planner/ir.h"

/* Append a backward node. For each output slot k, grad_of[k] names the tensor whose gradient
 * the output contributes to (the gradient tensor is created on first use, virtual for a
 * virtual tensor), or -1 for a plain new output. `fwd` is the forward node differentiated. */
int ad_emit(sg_graph *g, sg_op op, const int *in, int nin, const int *grad_of,
            const sg_op_args *args, const char *name, int fwd);

/* The gradient tensor of t, creating it (not yet written) if needed. Parameters' gradients
 * are the persistent `grad:<name>` tensors made with the parameter. */
int ad_grad_tensor(sg_graph *g, int t);

/* Differentiate: loss is a scalar produced by the last forward node. Appends the backward
 * nodes in reverse forward order. */
int ad_backward(sg_graph *g, int loss);

#endif
