//! Which node lists are faces of the mesh: a face load or a convection
//! face must be a face of one of the set's elements, its corners in a turn
//! of that face (either way) and, for the quadratic elements, each midpoint
//! after the corners that of the edge between corners i and i + 1 (the order
//! `fegpu_fem_face_load` documents). Anything else (nodes that share no
//! element, a quadrilateral's diagonal, a repeated node, a bow-tie order, a
//! midpoint of another edge) would be integrated as a face that is not
//! there, so it is refused by name.

use super::{Element, ElementSet};
use crate::error::{Error, Result};

/// The corners of each face of the element, in a turn (local node numbers;
/// kernels/fem.cu's node order: quadrilaterals counter-clockwise, hexahedra
/// the bottom's four, then the top's).
fn corner_faces(element: Element) -> &'static [&'static [usize]] {
    match element {
        Element::Tri3 | Element::Tri6 => &[&[0, 1], &[1, 2], &[2, 0]],
        Element::Quad4 | Element::Quad8 => &[&[0, 1], &[1, 2], &[2, 3], &[3, 0]],
        Element::Tet4 | Element::Tet10 => &[&[0, 1, 2], &[0, 1, 3], &[1, 2, 3], &[0, 2, 3]],
        Element::Hex8 | Element::Hex20 => {
            &[&[0, 1, 2, 3], &[4, 5, 6, 7], &[0, 1, 5, 4], &[1, 2, 6, 5], &[2, 3, 7, 6], &[3, 0, 4, 7]]
        }
    }
}

/// The quadratic elements' edges, each midpoint's node following the
/// corners in this order (src/fem/cpu.rs SIMPLEX_EDGES and the serendipity
/// midpoints); empty for the linear elements.
fn midpoint_edges(element: Element) -> &'static [[usize; 2]] {
    match element {
        Element::Tri6 => &[[0, 1], [1, 2], [2, 0]],
        Element::Tet10 => &[[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]],
        Element::Quad8 => &[[0, 1], [1, 2], [2, 3], [3, 0]],
        Element::Hex20 => &[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4], [0, 4], [1, 5], [2, 6], [3, 7]],
        _ => &[],
    }
}

/// Whether `given` (local corner numbers) runs round `face` one way or the other.
fn is_turn(given: &[usize], face: &[usize]) -> bool {
    let k = face.len();
    if given.len() != k {
        return false;
    }
    let Some(start) = face.iter().position(|&c| c == given[0]) else { return false };
    let forward = (0..k).all(|i| given[i] == face[(start + i) % k]);
    let backward = (0..k).all(|i| given[i] == face[(start + k - i) % k]);
    forward || backward
}

/// Whether the global `face` (corners, then midpoints) is a face of element
/// `e` as the module's rule says.
fn face_of(set: &ElementSet, e: usize, face: &[i32]) -> bool {
    let npe = set.element.nodes();
    let nodes = &set.conn[e * npe..(e + 1) * npe];
    // the corners come first, a midpoint for each edge after them
    let (faces, edges) = (corner_faces(set.element), midpoint_edges(set.element));
    let nc = npe - edges.len();
    let local = |g: i32| nodes.iter().position(|&n| n == g);
    let k = faces[0].len();
    let mut given = [0usize; 4];
    for (slot, &g) in given.iter_mut().zip(&face[..k]) {
        match local(g) {
            Some(l) if l < nc => *slot = l,
            _ => return false,
        }
    }
    let given = &given[..k];
    if !faces.iter().any(|f| is_turn(given, f)) {
        return false;
    }
    // the midpoints: one per edge of the turn (a 2-D edge has one)
    let mids = &face[k..];
    mids.iter().enumerate().all(|(i, &g)| {
        let (a, b) = (given[i], given[(i + 1) % k]);
        edges.iter().position(|&[p, q]| (p, q) == (a, b) || (p, q) == (b, a)).is_some_and(|m| nodes[nc + m] == g)
    })
}

/// Each node's elements (offsets, then the elements), built once per call.
fn node_elements(set: &ElementSet) -> (Vec<usize>, Vec<u32>) {
    let npe = set.element.nodes();
    let mut start = vec![0usize; set.nodes + 1];
    for &n in &set.conn {
        start[n as usize + 1] += 1;
    }
    for i in 0..set.nodes {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut elements = vec![0u32; set.conn.len()];
    for (i, &n) in set.conn.iter().enumerate() {
        elements[fill[n as usize]] = (i / npe) as u32;
        fill[n as usize] += 1;
    }
    (start, elements)
}

/// Refuses the first face (0-based nodes, `fnodes` a face) that is not a
/// face of the mesh, naming it as the caller counts from `base`.
pub fn check(set: &ElementSet, faces: &[i32], fnodes: usize, base: i64) -> Result<()> {
    if faces.is_empty() {
        return Ok(());
    }
    let (start, elements) = node_elements(set);
    for (i, face) in faces.chunks(fnodes).enumerate() {
        let first = face[0] as usize;
        if elements[start[first]..start[first + 1]].iter().any(|&e| face_of(set, e as usize, face)) {
            continue;
        }
        let shown: Vec<String> = face.iter().map(|&n| (n as i64 + base).to_string()).collect();
        return Err(Error::invalid(format!(
            "{} = ({}) is not a face of the mesh: its nodes must be those of one face of a {} element, the corners in a \
             turn round it{}",
            crate::error::column("faces", i, fnodes),
            shown.join(", "),
            set.element.name(),
            if midpoint_edges(set.element).is_empty() { "" } else { ", then each edge's midpoint in the same turn" }
        )));
    }
    Ok(())
}
