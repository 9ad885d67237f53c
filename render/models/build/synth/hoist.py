"""Move what the synthesis graph computes once per face into the palette graph.

Whatever mouth_synth computes without its `shape` input (the lips' geometry, the palette's colours
and the sizes derived from them) is the same for every frame of a face. The palette graph runs once
per face and is kept, so those values are computed there and handed over in its output; the
synthesis graph, run for every frame, keeps only what depends on the sound. Same operators on the
same values: the frames drawn are bit for bit what the graph drew computing them itself.

Only per-face values of a fixed size ([N,k,1,1]: scalars and short vectors) move; anything sized by
the crop (columns, maps) stays, with the few per-face operators it needs.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference


def _shapes(model: onnx.ModelProto) -> dict[str, list]:
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    out = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        t = v.type.tensor_type
        if t.HasField('shape'):
            dims = [d.dim_value if d.HasField('dim_value') else None for d in t.shape.dim]
            out[v.name] = (t.elem_type, dims)
    return out


def hoist_face_constants(palette: onnx.ModelProto, synth: onnx.ModelProto) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    sg, pg = synth.graph, palette.graph
    shapes = _shapes(synth)
    producer = {o: n for n in sg.node for o in n.output if o}
    inits = {t.name: t for t in sg.initializer}

    # what each node's outputs depend on: the sound (`shape`), or the face (`lips`, `palette`)
    per_frame, per_face = {'shape'}, {'lips', 'palette'}
    for n in sg.node:
        if any(i in per_frame for i in n.input):
            per_frame.update(n.output)
        if any(i in per_face for i in n.input):
            per_face.update(n.output)

    def movable(t: str) -> bool:
        elem, dims = shapes.get(t, (None, None))
        return (t in per_face and t not in per_frame and elem == TensorProto.FLOAT and dims is not None
                and len(dims) == 4 and dims[0] is None and all(isinstance(d, int) and d > 0 for d in dims[1:])
                and dims[2] == 1 and dims[3] == 1)

    # the nodes that stay: every per-frame one, and the per-face ones computing what cannot move
    stay = {id(n) for n in sg.node if any(o in per_frame for o in n.output) or not any(o in per_face for o in n.output)}
    stay |= {id(producer[o.name]) for o in sg.output}
    for n in reversed(sg.node):  # (in graph order, so a node's producers come after it here)
        if id(n) in stay:
            stay.update(id(producer[i]) for i in n.input if i in producer and not movable(i))
    read_by_stay = {i for n in sg.node if id(n) in stay for i in n.input}
    # the moved values the staying nodes read, in graph order
    handed = [o for n in sg.node if id(n) not in stay for o in n.output if o and o in read_by_stay]
    moved = set()
    todo = [producer[t] for t in handed]
    while todo:
        n = todo.pop()
        if id(n) in moved:
            continue
        moved.add(id(n))
        todo.extend(producer[i] for i in n.input if i in producer)

    # the palette graph: its own fields, then the moved nodes (renamed apart) computing the handed values
    (fields_out,) = [n for n in pg.node if n.op_type == 'Identity' and n.output[0] == 'palette']
    rename = {'palette': fields_out.input[0], 'lips': 'lips', 'size': 'h_size'}
    p_nodes = [n for n in pg.node if n is not fields_out]
    p_inits = list(pg.initializer)
    p_nodes.append(helper.make_node('Shape', ['crop'], ['h_size'], start=1, end=2))
    used = set()
    for n in sg.node:
        if id(n) not in moved:
            continue
        ins = []
        for i in n.input:
            if i in inits:
                used.add(i)
            ins.append(rename.get(i, f'h_{i}') if i else '')
        p_nodes.append(helper.make_node(n.op_type, ins, [f'h_{o}' if o else '' for o in n.output], **{
            a.name: helper.get_attribute_value(a) for a in n.attribute}))
    p_inits += [numpy_helper.from_array(numpy_helper.to_array(inits[i]), f'h_{i}') for i in sorted(used)]
    p_inits.append(helper.make_tensor('h_flat', TensorProto.INT64, [2], [0, -1]))
    width = sum(shapes[t][1][1] for t in handed)
    p_nodes.append(helper.make_node('Concat', [f'h_{t}' for t in handed], ['h_handed'], axis=1))  # [N,width,1,1]
    p_nodes.append(helper.make_node('Reshape', ['h_handed', 'h_flat'], ['palette']))
    (p_out,) = pg.output
    new_palette = helper.make_model(
        helper.make_graph(p_nodes, pg.name, list(pg.input),
                          [helper.make_tensor_value_info('palette', TensorProto.FLOAT, [p_out.type.tensor_type.shape.dim[0].dim_param or 'N', width])],
                          p_inits),
        opset_imports=list(palette.opset_import), producer_name=palette.producer_name)
    new_palette.ir_version = palette.ir_version
    new_palette.doc_string = palette.doc_string

    # the synthesis graph: the handed values split out of its palette input, then only the nodes that stay
    s_inits = [
        helper.make_tensor('h_cols', TensorProto.INT64, [4], [0, -1, 1, 1]),
        numpy_helper.from_array(np.asarray([shapes[t][1][1] for t in handed], dtype=np.int64), 'h_split'),
    ]
    s_nodes = [
        helper.make_node('Reshape', ['palette', 'h_cols'], ['h_palette']),
        helper.make_node('Split', ['h_palette', 'h_split'], handed, axis=1),
    ]
    s_nodes += [n for n in sg.node if id(n) in stay]
    read = {i for n in s_nodes for i in n.input}
    s_inits += [t for t in sg.initializer if t.name in read]
    inputs = []
    for v in sg.input:
        if v.name == 'palette':
            v = helper.make_tensor_value_info('palette', TensorProto.FLOAT, [v.type.tensor_type.shape.dim[0].dim_param, width])
        inputs.append(v)
    new_synth = helper.make_model(helper.make_graph(s_nodes, sg.name, inputs, list(sg.output), s_inits),
                                  opset_imports=list(synth.opset_import), producer_name=synth.producer_name)
    new_synth.ir_version = synth.ir_version
    new_synth.doc_string = synth.doc_string
    for m in (new_palette, new_synth):
        onnx.checker.check_model(m, full_check=True)
    return new_palette, new_synth
