mod answers;
mod model;
