fn main() { println!("todo"); }
