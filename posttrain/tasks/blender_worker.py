"""The program that runs INSIDE the Blender sandbox: one bpy process per episode.

Never imported by posttrain (bpy is GPL and lives only in its own venv, bound read-only
into the sandbox; see `blender_runtime.py`). It reads one JSON request per line on stdin,
`{"op": NAME, "args": {...}}`, applies it to the scene it holds, and writes one JSON line
back: `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`. The host has
already validated the arguments against the tool schemas; the checks here are the ones
only the scene can answer (does that object exist, is the name taken, is it a cycle).
`inspect` reports what the verifier scores from geometry Blender evaluates (modifiers in
effect, world space); it never reads custom properties, so values written there count
for nothing. The process exits when stdin closes or after IDLE_S seconds without a request.
"""

import json
import math
import os
import select
import sys
import time

# bpy writes its own messages ("Info: Saved ...") to fd 1: keep a private copy of stdout for
# the protocol and point fd 1 at stderr before bpy is imported.
PROTOCOL = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

import bpy  # noqa: E402  (bpy first: it makes bmesh and mathutils importable)
import bmesh  # noqa: E402
from mathutils import Vector  # noqa: E402

IDLE_S = 600.0
MAX_OBJECTS, MAX_MODIFIERS, MAX_COPIES = 100, 6, 256
SAVE_DIR = "/work"
PRIMITIVES = {
    "cube": lambda: bpy.ops.mesh.primitive_cube_add(size=2.0),
    "uv_sphere": lambda: bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0, segments=48, ring_count=24),
    "cylinder": lambda: bpy.ops.mesh.primitive_cylinder_add(radius=1.0, depth=2.0, vertices=64),
    "cone": lambda: bpy.ops.mesh.primitive_cone_add(radius1=1.0, depth=2.0, vertices=64),
    "plane": lambda: bpy.ops.mesh.primitive_plane_add(size=2.0),
    "torus": lambda: bpy.ops.mesh.primitive_torus_add(major_radius=1.0, minor_radius=0.25),
}


class Refused(Exception):
    """A request the scene cannot honour: returned to the model as the observation."""


def _obj(name):
    obj = bpy.data.objects.get(name)
    if obj is None:
        raise Refused(f"no object named {name!r} (objects: {', '.join(sorted(o.name for o in bpy.data.objects)) or 'none'})")
    return obj


def _free_name(name):
    if bpy.data.objects.get(name) is not None:
        raise Refused(f"an object named {name!r} already exists")


def _transform(obj, a):
    if a.get("location") is not None:
        obj.location = a["location"]
    if a.get("rotation") is not None:
        obj.rotation_euler = [math.radians(d) for d in a["rotation"]]
    if a.get("scale") is not None:
        obj.scale = a["scale"]


def op_reset(a):
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return "empty scene"


def op_add_primitive(a):
    _free_name(a["name"])
    if len(bpy.data.objects) >= MAX_OBJECTS:
        raise Refused(f"the scene already holds {MAX_OBJECTS} objects, the most a task allows")
    PRIMITIVES[a["shape"]]()
    obj = bpy.context.active_object
    obj.name = obj.data.name = a["name"]
    _transform(obj, a)
    return f"added {a['shape']} {obj.name!r}"


def op_set_transform(a):
    obj = _obj(a["name"])
    _transform(obj, a)
    return f"transformed {obj.name!r}"


def op_parent(a):
    bpy.context.view_layer.update()
    child = _obj(a["child"])
    if a.get("parent") is None:
        world = child.matrix_world.copy()
        child.parent = None
        child.matrix_world = world
        return f"{child.name!r} has no parent"
    parent = _obj(a["parent"])
    p = parent
    while p is not None:  # walk up: a cycle would make the child its own ancestor
        if p == child:
            raise Refused(f"parenting {child.name!r} under {parent.name!r} makes a cycle")
        p = p.parent
    world = child.matrix_world.copy()
    child.parent = parent
    child.matrix_parent_inverse = parent.matrix_world.inverted()  # keep the child where it is in the world
    child.matrix_world = world
    return f"{child.name!r} parented to {parent.name!r} (world transform kept)"


def op_add_material(a):
    if bpy.data.materials.get(a["name"]) is not None:
        raise Refused(f"a material named {a['name']!r} already exists")
    mat = bpy.data.materials.new(a["name"])
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Base Color"].default_value = (*a["color"], 1.0)
    bsdf.inputs["Roughness"].default_value = a.get("roughness", 0.5)
    bsdf.inputs["Metallic"].default_value = a.get("metallic", 0.0)
    return f"material {mat.name!r} created"


def op_assign_material(a):
    obj = _obj(a["object"])
    mat = bpy.data.materials.get(a["material"])
    if mat is None:
        raise Refused(f"no material named {a['material']!r}; create it with blender_add_material first")
    if obj.type != "MESH":
        raise Refused(f"{obj.name!r} is a {obj.type.lower()}, not a mesh")
    obj.data.materials.clear()
    obj.data.materials.append(mat)
    return f"{mat.name!r} assigned to {obj.name!r}"


def op_add_modifier(a):
    obj = _obj(a["object"])
    if obj.type != "MESH":
        raise Refused(f"{obj.name!r} is a {obj.type.lower()}, not a mesh")
    kind = a["type"]
    copies = math.prod(m.count for m in obj.modifiers if m.type == "ARRAY") * a.get("count", 2) if kind == "array" else 1
    if copies > MAX_COPIES or len(obj.modifiers) >= MAX_MODIFIERS:
        # the model's request would make geometry past the sandbox's memory: refuse it as the model's mistake
        raise Refused(f"too much geometry: at most {MAX_MODIFIERS} modifiers per object and {MAX_COPIES} array copies in all")
    mod = obj.modifiers.new(name=a.get("name") or kind, type=kind.upper())
    if kind == "bevel":
        mod.width, mod.segments = a.get("width", 0.1), a.get("segments", 3)
    elif kind == "array":
        mod.count = a.get("count", 2)
        mod.use_relative_offset, mod.relative_offset_displace = True, a.get("relative_offset", [1.0, 0.0, 0.0])
    elif kind == "mirror":
        axis = a.get("axis", "x")
        mod.use_axis = [axis == "x", axis == "y", axis == "z"]
    elif kind == "boolean":
        if a.get("target") is None or a["target"] == obj.name:
            obj.modifiers.remove(mod)
            raise Refused("a boolean modifier needs a 'target' object other than the one modified")
        try:
            target = _obj(a["target"])
        except Refused:
            obj.modifiers.remove(mod)
            raise
        mod.operation, mod.object, mod.solver = a.get("operation", "difference").upper(), target, "EXACT"
        if a.get("hide_target", True):
            target.hide_render = target.hide_viewport = True
    return f"{kind} modifier added to {obj.name!r}"


def op_set_camera(a):
    cam = bpy.data.objects.get("Camera")
    if cam is None:
        cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        bpy.context.scene.collection.objects.link(cam)
    cam.location = a["location"]
    direction = Vector(a["look_at"]) - Vector(a["location"])
    if direction.length < 1e-6:
        raise Refused("look_at must differ from the camera location")
    cam.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    cam.data.lens = a.get("lens", 50.0)
    bpy.context.scene.camera = cam
    return "camera set"


def op_add_light(a):
    _free_name(a["name"])
    data = bpy.data.lights.new(a["name"], type=a["type"].upper())
    data.energy, data.color = a.get("energy", 1000.0), a.get("color", [1.0, 1.0, 1.0])
    obj = bpy.data.objects.new(a["name"], data)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = a["location"]
    return f"{a['type']} light {obj.name!r} added"


def op_delete(a):
    obj = _obj(a["name"])
    bpy.data.objects.remove(obj, do_unlink=True)
    return f"deleted {a['name']!r}"


def _describe(obj):
    d = {"name": obj.name, "type": obj.type.lower(), "location": [round(v, 4) for v in obj.matrix_world.translation],
         "rotation": [round(math.degrees(v), 3) for v in obj.rotation_euler], "scale": [round(v, 4) for v in obj.scale],
         "parent": obj.parent.name if obj.parent else None, "visible": not obj.hide_render}
    if obj.type == "MESH":
        d["dimensions"] = [round(v, 4) for v in obj.dimensions]
        d["materials"] = [m.name for m in obj.data.materials if m]
        d["modifiers"] = [{"type": m.type.lower(), "name": m.name} for m in obj.modifiers]
    return d


def op_stats(a):
    import resource

    return {"max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def op_query_scene(a):
    bpy.context.view_layer.update()  # matrix_world is stale until the depsgraph runs
    return {"objects": [_describe(o) for o in sorted(bpy.data.objects, key=lambda o: o.name)],
            "materials": sorted(m.name for m in bpy.data.materials)}


def op_save(a):
    path = f"{SAVE_DIR}/{a.get('filename', 'scene.blend')}"
    bpy.ops.wm.save_as_mainfile(filepath=path, check_existing=False, compress=False)
    return f"saved {path}"


def _measure(obj, depsgraph):
    """World-space bounds, volume and area of the evaluated mesh (modifiers in effect)."""
    ev = obj.evaluated_get(depsgraph)
    bm = bmesh.new()
    bm.from_object(ev, depsgraph)
    bm.transform(obj.matrix_world)
    if not bm.verts:
        bm.free()
        return {"min": [0, 0, 0], "max": [0, 0, 0], "volume": 0.0, "area": 0.0, "vertices": 0}
    xs = [v.co for v in bm.verts]
    lo = [min(c[i] for c in xs) for i in range(3)]
    hi = [max(c[i] for c in xs) for i in range(3)]
    out = {"min": lo, "max": hi, "volume": abs(bm.calc_volume(signed=True)),
           "area": sum(f.calc_area() for f in bm.faces), "vertices": len(bm.verts)}
    bm.free()
    return out


def _material_values(mat):
    bsdf = mat.node_tree.nodes.get("Principled BSDF") if mat.use_nodes and mat.node_tree else None
    if bsdf is None:
        return {"name": mat.name, "color": list(mat.diffuse_color)[:3], "roughness": mat.roughness, "metallic": mat.metallic}
    return {"name": mat.name, "color": list(bsdf.inputs["Base Color"].default_value)[:3],
            "roughness": bsdf.inputs["Roughness"].default_value, "metallic": bsdf.inputs["Metallic"].default_value}


def op_inspect(a):
    """Open a saved .blend afresh and report what the verifier scores (never custom properties)."""
    bpy.ops.wm.open_mainfile(filepath=a["path"], load_ui=False)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    objects = []
    for obj in sorted(bpy.data.objects, key=lambda o: o.name):
        d = {"name": obj.name, "type": obj.type.lower(), "visible": not obj.hide_render,
             "location": list(obj.matrix_world.translation), "parent": obj.parent.name if obj.parent else None}
        if obj.type == "MESH":
            d.update(_measure(obj, depsgraph))
            d["materials"] = [_material_values(m) for m in obj.data.materials if m]
            d["modifiers"] = [m.type.lower() for m in obj.modifiers]
        elif obj.type == "CAMERA":
            d["view_direction"] = list(obj.matrix_world.to_quaternion() @ Vector((0.0, 0.0, -1.0)))
        elif obj.type == "LIGHT":
            d.update(light=obj.data.type.lower(), energy=obj.data.energy)
        objects.append(d)
    cam = bpy.context.scene.camera
    return {"objects": objects, "camera": cam.name if cam else None}


OPS = {name[3:]: fn for name, fn in dict(globals()).items() if name.startswith("op_")}


def serve():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    out = PROTOCOL
    out.write(json.dumps({"ok": True, "result": {"ready": bpy.app.version_string}}) + "\n")
    out.flush()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], IDLE_S)
        if not ready:
            return
        line = sys.stdin.readline()
        if not line:
            return
        t0 = time.perf_counter()
        try:
            req = json.loads(line)
            fn = OPS.get(req.get("op"))
            if fn is None:
                raise Refused(f"unknown op {req.get('op')!r}")
            reply = {"ok": True, "result": fn(req.get("args") or {})}
        except Refused as e:
            reply = {"ok": False, "error": str(e)}
        except Exception as e:  # noqa: BLE001  a bpy error is the request's fault, not the session's
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        reply["ms"] = round((time.perf_counter() - t0) * 1000, 3)
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
